"""The open batch an enqueue joins (issue 34): a context variable the ``workflows`` room sets.

``queues.batch()`` and ``queues.current_batch()`` (``queues/workflows/``) sit above the producer: they
open a batch by setting ``OPEN`` to an object with ``id`` and ``joined(job_ids)``; every enqueue of this
thread (or task) inside the block stamps the batch's id into the job's meta (``jobs/meta.py`` ``BATCH``)
before the job is signed and written, and reports the ids it wrote. With no batch open an enqueue
reads one context variable and writes nothing more: its job, and its signed message, are as before.
"""

from contextvars import ContextVar
from typing import Any, Protocol


class Joining(Protocol):
    id: str

    def joined(self, job_ids: list[str]) -> None: ...


OPEN: ContextVar[Any] = ContextVar("queues_open_batch", default=None)


def current() -> "Joining | None":
    """The batch the enqueues here join, or None."""
    return OPEN.get()
