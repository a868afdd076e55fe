"""The producer side: putting a job on a queue. The public API (``api``; ``bulk`` for ``enqueue_many``), the
Redis write (``write``), the transactional outbox (``outbox``; ``outbox_many`` for a batch), per-key limits
(``limits``: a concurrency; ``rates``: a rate; ``limitkeys``: the names of a key both share) and cancel (``cancel``).
"""
