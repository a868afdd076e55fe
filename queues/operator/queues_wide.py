"""The queue-wide actions: "Empty" a queue, "Delete All" and "Requeue All" of its failed jobs, each one
target (the queue's name) of the service, whichever door asks (the panel's buttons, code, the admin, the API
through ``queues.perform(actor, "empty", ["default"], confirmed=True)``).

Written for the 200,000-job case: "Empty" is the queue's own Lua (``OptimaQueue.empty``: each band's jobs and
their results deleted on the server); "Delete All" and "Requeue All" walk the failed registry in chunks of
``CHUNK`` ids, each chunk's jobs read in one round trip and acted on in one pipeline (django-rq's "Delete All"
loads every job at once with pickle, its "Requeue All" makes three round trips per job).

A corrupt job never stops them: "Delete All" deletes its keys, "Requeue All" leaves it in the failed
registry and says how many it skipped. A queue key of the wrong type (planted) is deleted by "Empty", which
empties it; a failed registry of the wrong type holds no failed job. One ``Result`` per queue, one audit row
for the lot (the service's): its ids are the first ``audit.MAX_JOB_IDS`` acted on, its detail the counts.
"""

import redis
from rq.job import JobStatus
from rq.registry import FailedJobRegistry

from queues import audit, rqcompat
from queues.catalog.lookup import get_queue
from queues.exceptions import QueueUnavailable, UnknownQueue
from queues.failures.operations import lives_elsewhere
from queues.jobs import read as jobread
from queues.models import DeadLetter
from queues.operator.jobs import mark_rows
from queues.operator.results import Result, done, refused
from queues.producer import limits

CHUNK = 500  # failed ids per chunk of "Delete All" / "Requeue All": one read and one write round trip each


def run(action, name, queue=None) -> Result:
    """``action`` ("empty", "delete_all_failed", "requeue_all") on the queue ``name`` (``queue``: the door's
    rq queue of that name, on its connection, when it has one) -> Result, never raising for Redis: a
    Redis error is the queue's own answer (``data["unavailable"]``, with what was done before it)."""
    try:
        if queue is None or queue.name != name:
            queue = get_queue(name)
    except UnknownQueue as exc:
        return refused(name, str(exc), queue=name, job_ids=())
    progress = Progress()
    try:
        if action == "empty":
            return _empty(queue)
        if action == "delete_all_failed":
            return _walk(queue, "deleted", _delete, progress, delete_corrupt=True)
        return _walk(queue, "requeued", _requeue, progress, delete_corrupt=False)
    except (redis.RedisError, QueueUnavailable) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        if progress.count:
            detail += f" (after {progress.count} failed jobs were handled)"
        return refused(name, detail, queue=name, job_ids=tuple(progress.touched), data={"unavailable": True})


# --- Empty --------------------------------------------------------------------------------------------


def _empty(queue):
    """rq's ``empty`` of every band (the queue's Lua), audited with the count and the first ids it removes."""
    connection = queue.connection
    with connection.pipeline(transaction=False) as pipe:  # the count, the first ids and the key's type at once
        pipe.type(queue.key)
        for key in queue.band_keys:
            pipe.llen(key)
        for key in queue.band_keys:
            pipe.lrange(key, 0, audit.MAX_JOB_IDS - 1)
        kind, *replies = pipe.execute(raise_on_error=False)
    bands = len(queue.band_keys)
    counts = [r if isinstance(r, int) else 0 for r in replies[:bands]]  # a band of the wrong type: its own
    first_ids = [jobread.text(i) for r in replies[bands:] if isinstance(r, list) for i in r][: audit.MAX_JOB_IDS]
    kind = jobread.text(kind) if not isinstance(kind, Exception) else "none"
    if kind not in ("list", "none"):
        connection.delete(queue.key)
        detail = f"queue key {queue.key} was a {kind}, not a list: deleted"
        return done(queue.name, detail, queue=queue.name, job_ids=(), data={"count": 0, "wrong_type": kind})
    queue.empty()
    count = sum(counts)
    return done(
        queue.name, f"emptied {count} waiting jobs", queue=queue.name, job_ids=tuple(first_ids), data={"count": count}
    )


# --- Delete All / Requeue All: a walk of the failed registry ----------------------------------------


class Progress:
    """What a walk has done so far: ids handled, their first ``audit.MAX_JOB_IDS`` (the audit row's), the
    ids whose job was gone and those of corrupt jobs."""

    def __init__(self):
        self.count = 0
        self.touched: list[str] = []
        self.gone: list[str] = []
        self.corrupt: list[str] = []


def _failed_chunk(queue, offset):
    """Up to ``CHUNK`` ids of the failed registry from ``offset`` on, as Redis holds them (bytes); none when
    the registry's key is of the wrong type."""
    key = FailedJobRegistry(queue.name, queue.connection).key
    try:
        return queue.connection.zrange(key, offset, offset + CHUNK - 1)
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        return []


def _walk(queue, verb, per_job, progress, delete_corrupt):
    """Take every failed job of ``queue`` out of the failed registry in chunks, apply ``per_job(queue, pipe,
    job)`` to each job Redis still has, and move their dead-letter rows. A corrupt job's keys are deleted when
    ``delete_corrupt``, else it stays in the registry (skipped over)."""
    registry_key = FailedJobRegistry(queue.name, queue.connection).key
    seen: set[bytes] = set()
    # Until the registry is empty, or holds only ids already handled (written back meanwhile).
    while raw_ids := _failed_chunk(queue, 0 if delete_corrupt else len(progress.corrupt)):
        raw_ids = [r for r in raw_ids if r not in seen]
        if not raw_ids:
            break
        jobs = jobread.fetch_many(raw_ids, queue.connection)
        with queue.connection.pipeline() as pipe:
            for raw, job in zip(raw_ids, jobs):
                if jobread.is_corrupt(job) and not delete_corrupt:
                    continue
                pipe.zrem(registry_key, raw)
                if jobread.is_corrupt(job):
                    jobread.delete_keys(pipe, raw)
                elif job is not None:
                    per_job(queue, pipe, job)
            pipe.execute()
        ids = [jobread.text(r) for r in raw_ids]
        found = [i for i, job in zip(ids, jobs) if job is not None and not jobread.is_corrupt(job)]
        progress.gone.extend(i for i, job in zip(ids, jobs) if job is None)
        progress.corrupt.extend(i for i, job in zip(ids, jobs) if jobread.is_corrupt(job))
        if delete_corrupt:  # a job already gone is as deleted as it gets: its row is discarded too
            mark_rows(ids, DeadLetter.Status.DISCARDED)
        else:  # only the rows of jobs requeued; one whose job was gone stays open (retry it from its row)
            mark_rows(found, DeadLetter.Status.RETRIED, retried_as_self=True)
        progress.touched.extend(ids[: max(0, audit.MAX_JOB_IDS - len(progress.touched))])
        progress.count += len(raw_ids)
        seen.update(raw_ids)
    gone, corrupt = progress.gone, progress.corrupt
    acted = progress.count - len(gone) - len(corrupt)
    detail = f"{verb} {acted} failed jobs"
    if gone:
        detail += f"; {len(gone)} listed in the failed registry were no longer in Redis (taken off the registry)"
    if corrupt:
        detail += f"; {len(corrupt)} corrupt " + ("deleted" if delete_corrupt else "skipped (left in the registry)")
    data = {"count": acted, "gone": list(gone), "corrupt": list(corrupt)}
    return done(queue.name, detail, queue=queue.name, job_ids=tuple(progress.touched), data=data)


def _delete(queue, pipe, job):
    if not lives_elsewhere(job, queue.name):  # else only off this failed registry (issue 32)
        job.delete(pipeline=pipe, remove_from_queue=False)


def _requeue(queue, pipe, job):
    job.started_at = job.ended_at = None
    rqcompat.clear_exc_info(job)
    if limits.goes_through_limit(job):  # held by its rate and/or concurrency, as at its enqueue
        limits.enqueue_into(queue, job, pipe)
        return
    job.set_status(JobStatus.QUEUED, pipeline=pipe)
    rqcompat.enqueue_prepared(queue, job, pipe)
