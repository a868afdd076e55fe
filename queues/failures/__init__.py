"""How a job fails: the retry policy (``retry``), the failure handler (``handler``), dead letters
(``deadletter``: the lifecycle and burial, with ``mirror`` for the DeadLetter row, ``reconcile`` for
catching up with Redis, ``corrupt`` for jobs whose hash is no job, ``unverified`` for dead letters whose
signature does not verify), a popped job the gate refused (``refused``), failure groups
(``fingerprint``) and the operator's retry and discard (``operations``).
"""
