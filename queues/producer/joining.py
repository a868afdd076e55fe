"""The open batch an enqueue joins (issue 34): a context variable the ``workflows`` room sets.

``queues.batch()`` and ``queues.current_batch()`` (``queues/workflows/``) sit above the producer: they
open a batch by setting ``OPEN`` to an object with ``id`` and ``joined(job_ids)``; every enqueue of this
thread (or task) inside the block stamps the batch's id into the job's meta (``jobs/meta.py`` ``BATCH``)
before the job is signed and written, and reports the ids it wrote. With no batch open an enqueue
reads one context variable and writes nothing more: its job, and its signed message, are as before.
"""

from contextvars import ContextVar
from typing import Any, Protocol

from queues.conf import DEFAULT_SERVER
from queues.exceptions import InvalidJob


class Joining(Protocol):
    id: str

    def joined(self, job_ids: list[str]) -> None: ...


OPEN: ContextVar[Any] = ContextVar("queues_open_batch", default=None)


def current() -> "Joining | None":
    """The batch the enqueues here join, or None."""
    return OPEN.get()


def check_member(name: str, server: str) -> None:
    """Refuse to make a job of the queue ``name``, which lives on the Redis server ``server``, a member of a
    batch unless that is the default server (issue 36): a batch's keys are on the default server, and a
    member's count is written in the MULTI of its success, on its own queue's server."""
    if server != DEFAULT_SERVER:
        raise InvalidJob(
            f"enqueue({name!r}, ...) inside queues.batch(): queue {name!r} lives on the Redis server {server!r}, "
            "and a batch's members must live on the default server (its keys are there; a member is counted in "
            "its success's write, on its own server). Enqueue it outside the batch, or make the batch of queues "
            "of the default server (docs/settings.md#several-redis-servers)."
        )
