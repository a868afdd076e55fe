"""The job running now, as a job's own code sees it: ``queues.current_job()``.

Job code asks for its id, its queue, the attempt it is on, its meta (read only) and reports its progress
through ``RunningJob``, never through rq's ``get_current_job`` and ``job.meta[...] = ...; job.save_meta()``:
the meta keys are this app's (queues/jobs/meta.py), and how a running job's state is written is the app's to
change. rq keeps the running job in a context variable, set around the job's call wherever it runs (a forked
work horse, ``--no-fork``, each thread of ``--concurrency``, the pool's processes, a ``@task``, and
``queues.testing.inline()``), so ``current_job()`` answers in each, and None anywhere else.

``RunningJob`` writes only through ``_save``. A long job (issue 34) reads ``cursor`` and writes
``checkpoint(cursor, done=..., total=...)``: one more meta key (``jobs.meta.CURSOR``) written the same way, in
the same round trip as the read of a cancel request; what a checkpoint may decide (a pause) is
``queues/jobs/resume.py``'s.
"""

from types import MappingProxyType
from typing import Any

import redis
from rq.job import Job, get_current_job

from queues.connection.clients import unavailable
from queues.jobs import meta as jobmeta
from queues.jobs import resume


class RunningJob:
    """The running job: ``id``, ``queue`` (its declared name), ``attempt`` (1-based), ``meta`` (a read-only
    view of its meta), ``set_progress(done, total)``; for a long job, ``cursor`` and ``checkpoint(cursor)``."""

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

    @property
    def cursor(self) -> Any:
        """The cursor of the job's last ``checkpoint`` (in this run or an earlier one: before a pause, a
        failure, a lost worker), or None when it never wrote one: start from the beginning."""
        return jobmeta.cursor(self._running.meta)

    def checkpoint(self, cursor: Any, *, done: int | float | None = None, total: int | float | None = None) -> None:
        """Store ``cursor`` (a JSON value of at most ``resume.MAX_CURSOR_BYTES`` encoded: the position after
        the items done, e.g. ``{"page": 401}``) with the job: its next run starts from it (``.cursor``).
        With ``total`` (and ``done``, default 0), the job's progress is written in the same HSET
        (``set_progress(done, total)``: the panel's bar, ``job_state``).

        Then, when the job must stop here, raises ``resume.Pause`` (a ``BaseException``: let it pass): its
        worker is stopping, it ran past its ``max_run_seconds``, or it was canceled. A paused job goes back
        to its queue, costs no attempt, and runs again from ``cursor``; a canceled one ends canceled.

        ``ValueError`` for a cursor that is not JSON or too large, or a ``done``/``total`` that
        ``set_progress`` refuses; ``QueueUnavailable`` when Redis does not answer (the cursor is then not
        stored)."""
        value = resume.check_cursor(cursor)
        meta = self._running.meta
        if total is not None:
            jobmeta.set_progress(meta, 0 if done is None else done, total)
        elif done is not None:
            raise ValueError(f"checkpoint(cursor, done={done!r}): done needs total=, the number of items in all.")
        jobmeta.set_cursor(meta, value)
        canceled = self._save(read_cancel=True)
        if getattr(self._running, "_queues_inline", False):
            return  # queues.testing.inline(): the job runs to its end in the caller's thread, never paused
        pause = resume.due(self._running, cancel_requested=canceled)
        if pause is not None:
            self._running._queues_pausing = True  # type: ignore[attr-defined]  # no failure callback for it
            raise pause

    def _save(self, read_cancel: bool = False) -> bool:
        """Write the job's meta (one HSET of its hash); with ``read_cancel``, in the same round trip, whether
        ``queues.cancel`` asked it to stop (``resume.CANCEL_REQUESTED``). A job run by
        ``queues.testing.inline()`` has no hash: its meta stays in memory."""
        job = self._running
        if getattr(job, "_queues_inline", False):
            return False
        try:
            if not read_cancel:
                job.save_meta()
                return False
            with job.connection.pipeline(transaction=False) as pipe:
                pipe.hset(job.key, "meta", job.serializer.dumps(job.meta))
                pipe.hexists(job.key, resume.CANCEL_REQUESTED)
                return bool(pipe.execute()[1])
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
