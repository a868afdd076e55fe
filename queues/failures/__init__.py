"""How a job fails: the retry policy (``retry``), the failure handler (``handler``), dead letters
(``deadletter``), failure groups (``fingerprint``) and the operator's retry and discard (``operations``).
"""
