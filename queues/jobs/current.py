"""The job running now, as a job's own code sees it: ``queues.current_job()``.

Job code asks for its id, its queue, the attempt it is on, its meta (read only) and reports its progress
through ``RunningJob``, never through rq's ``get_current_job`` and ``job.meta[...] = ...; job.save_meta()``:
the meta keys are this app's (queues/jobs/meta.py), and how a running job's state is written is the app's to
change. rq keeps the running job in a context variable, set around the job's call wherever it runs (a forked
work horse, ``--no-fork``, each thread of ``--concurrency``, the pool's processes, a ``@task``, and
``queues.testing.inline()``), so ``current_job()`` answers in each, and None anywhere else.

``RunningJob`` writes only through ``_save``: the cursor and ``checkpoint(cursor)`` a later issue adds are
one more meta key (queues/jobs/meta.py) and one more method on it, written the same way.
"""

from types import MappingProxyType
from typing import Any

import redis
from rq.job import Job, get_current_job

from queues.connection.clients import unavailable
from queues.jobs import meta as jobmeta


class RunningJob:
    """The running job: ``id``, ``queue`` (its declared name), ``attempt`` (1-based), ``meta`` (a read-only
    view of its meta), ``set_progress(done, total)``."""

    __slots__ = ("_running",)

    def __init__(self, job: Job) -> None:
        self._running = job

    @property
    def id(self) -> str:
        return self._running.id

    @property
    def queue(self) -> str:
        """The declared queue the job was enqueued on."""
        return jobmeta.queue_name(self._running)

    @property
    def attempt(self) -> int:
        """The attempt running now: 1 for the first run, 2 for the first retry, ..."""
        return jobmeta.current_attempt(self._running)

    @property
    def meta(self) -> MappingProxyType[str, Any]:
        """The job's meta, read only (a live view: it shows what ``set_progress`` writes)."""
        return MappingProxyType(self._running.meta if isinstance(self._running.meta, dict) else {})

    def set_progress(self, done: int | float, total: int | float) -> None:
        """Report ``done`` of ``total`` steps (numbers, ``0 <= done``, ``total > 0``): shown by
        ``GET /jobs/<id>/`` (``progress``), ``queues.job_state`` and the queue panel's progress bar.
        ``ValueError`` for numbers outside those bounds; ``QueueUnavailable`` when Redis does not answer."""
        jobmeta.set_progress(self._running.meta, done, total)
        self._save()

    def _save(self) -> None:
        """Write the job's meta (one HSET of its hash). A job run by ``queues.testing.inline()`` has no hash:
        its meta stays in memory."""
        if getattr(self._running, "_queues_inline", False):
            return
        try:
            self._running.save_meta()
        except redis.RedisError as exc:
            raise unavailable(exc) from exc

    def __repr__(self) -> str:
        return f"<RunningJob {self.id} on {self.queue!r}, attempt {self.attempt}>"


def current_job() -> RunningJob | None:
    """The job running in this thread (``RunningJob``), or None outside a job (a view, a shell, a test
    that calls the job's function directly)."""
    job = get_current_job()
    return None if job is None else RunningJob(job)


__all__ = ["RunningJob", "current_job"]
