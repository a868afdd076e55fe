"""The producer side: putting a job on a queue. The public API (``api``), the one Redis write (``write``), the
transactional outbox (``outbox``), per-key limits (``limits``) and cancel (``cancel``).
"""
