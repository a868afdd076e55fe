"""What exists: declared jobs (``jobs``), declared queues (``queues``), the rq classes that
refuse anything else (``classes``) and the name -> queue lookup (``lookup``).
"""
