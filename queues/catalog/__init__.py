"""What exists: declared jobs (``jobs``), declared queues (``queues``), the rq classes that
refuse anything else (``classes``), the name -> queue lookup (``lookup``) and the per-queue pause
flag that workers honour and the panel, /metrics and the tasks read (``pause``).
"""
