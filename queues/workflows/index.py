"""The batches the panel lists (issue 34, section 4): ``<p>:optima:batch-index``, a sorted set of batch id ->
when it opened (unix seconds).

Written by ``add`` inside the MULTI that opens a batch (``batches.py``), which also trims it there: entries
older than ``keep_seconds()`` (the jobs' retention, at least ``KEEP_FLOOR``) and past the newest
``MAX_ENTRIES`` are dropped, so the index stays bounded however many batches a run opens. A batch's own
keys expire on their own (docs/workflows.md); the index does not follow them: the panel's reader
(``queues/board/batches.py``) reads one page, newest first, and drops the ids whose hash is gone. A batch
still running after ``keep_seconds()`` leaves the list, not Redis: its page, by id, still shows it.

Imports nothing of ``queues.workflows``: ``batches.py`` imports it.
"""

from typing import Any

from queues import conf
from queues.keyspace import keys

KEEP_FLOOR = 7 * 86400  # seconds an index entry is kept at least (a long batch stays listed a week)
MAX_ENTRIES = 10_000  # newest batches the index keeps


def keep_seconds() -> int:
    """Seconds an entry stays in the index: the jobs' retention (``result_ttl``), at least ``KEEP_FLOOR``."""
    return max(KEEP_FLOOR, int(conf.job_defaults()["result_ttl"]))


def add(pipe: Any, batch_id: str, created: float) -> None:
    """In the MULTI that opens ``batch_id``: list it, and trim the index by age and length."""
    key = keys.batch_index_key()
    pipe.zadd(key, {batch_id: created})
    pipe.zremrangebyscore(key, "-inf", f"({created - keep_seconds()}")
    pipe.zremrangebyrank(key, 0, -(MAX_ENTRIES + 1))
