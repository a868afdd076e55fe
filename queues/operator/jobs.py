"""What each action does to one job (``run``), with the job's dead letter following it, and the walk of
every job of a queue in one state (``select``: the panel's "select all, across pages", by filter).

Each runner answers one ``Result`` and never raises for one job: a missing job, a corrupt one, an invalid
operation or a Redis error is that job's own answer, and the others go on. Dead letters follow the jobs:
a failed job requeued or enqueued marks its row ``retried`` (as itself), a deleted one ``discarded``; a row
``stopped`` (a job stopped from the panel, ``failures/mirror.py``) follows the same way. (A requeued dead
job gets a full set of attempts again: the worker resets them when it starts a job marked dead.)
Corrupt jobs never stop an action: a delete deletes their keys, a requeue refuses them.
"""

import redis
from django.db.models import F
from django.utils import timezone
from rq.command import send_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.registry import (
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ReadyJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.results import Result

from queues import conf
from queues.catalog.lookup import job_connection
from queues.exceptions import QueueUnavailable
from queues.failures.operations import lives_elsewhere, mark_dead_letters, push_back_into, requeue
from queues.jobs import read as jobread
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.operator.results import changed, done, refused
from queues.producer.cancel import cancel
from queues.templatetags.queues_panel import panel_state

CHUNK = 500  # ids per round trip of a walk across a whole queue (as "Requeue All")

# The states a selection across pages can name, and where each lives (None: the queue's lists).
REGISTRIES = {
    "queued": None,
    "started": StartedJobRegistry,
    "deferred": DeferredJobRegistry,
    "scheduled": ScheduledJobRegistry,
    "finished": FinishedJobRegistry,
    "failed": FailedJobRegistry,
    "canceled": CanceledJobRegistry,
}


class InvalidSelection(ValueError):
    """A selection across pages that names no state, or an unknown one: the message names the field, the
    value and the fix."""


def failed_ids(queue, job_ids):
    """The subset of ``job_ids`` in the queue's failed registry, in order (one round trip)."""
    registry = FailedJobRegistry(queue.name, queue.connection)
    with queue.connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.zscore(registry.key, jobread.normal_id(job_id))
        scores = pipe.execute(raise_on_error=False)  # a registry key of the wrong type: in none
    return [j for j, s in zip(job_ids, scores) if s is not None and not isinstance(s, Exception)]


def mark_rows(job_ids, status, retried_as_self=False):
    """``operations.mark_dead_letters`` (the open rows of ``job_ids`` -> ``status``), and the rows ``stopped``
    too: a job stopped from the panel has one (not ``open``: ``mirror.opened_as``), which follows its job."""
    job_ids = list(job_ids)
    mark_dead_letters(job_ids, status, retried_as_self=retried_as_self)
    updates = {
        "status": status,
        "updated_at": timezone.now(),
        **({"retried_as": F("job_id")} if retried_as_self else {}),
    }
    for start in range(0, len(job_ids), 500):
        DeadLetter.objects.filter(
            prefix=conf.prefix(), job_id__in=job_ids[start : start + 500], status=DeadLetter.Status.STOPPED
        ).update(**updates)


def mark_rows_of(action, failed):
    """After a successful requeue/enqueue/delete of jobs that were in the failed registry, their dead-letter
    rows follow at once (no wait for the reconcile)."""
    if not failed:
        return
    if action in ("requeue", "enqueue"):
        mark_rows(failed, DeadLetter.Status.RETRIED, retried_as_self=True)
    elif action == "delete":
        mark_rows(failed, DeadLetter.Status.DISCARDED)


def send_stop(queue, job):
    """rq's stop-job command to the worker running ``job`` (rq's ``send_stop_job_command`` without its own read
    of the job): (True, "stop sent"), or (False, why) when none runs it."""
    worker_name = None if job is None or jobread.is_corrupt(job) else job.worker_name
    if not worker_name:
        return False, "the job is not running"
    send_command(queue.connection, worker_name, "stop-job", job_id=job.id)
    return True, "stop sent"


def _state(job):
    return "gone" if job is None else "corrupt" if jobread.is_corrupt(job) else panel_state(job)


def run(action, queue, job_id, in_failed=False):
    """``action`` on one job of ``queue`` (``in_failed``: listed in its failed registry) -> Result."""
    name = getattr(queue, "name", "") or ""
    try:
        if action == "cancel":
            return _cancel(job_id, queue)
        job = jobread.fetch(job_id, queue.connection)
        if action == "stop":
            stopped, detail = send_stop(queue, job)
            return done(job_id, detail, queue=name) if stopped else changed(job_id, _state(job), detail, queue=name)
        if job is None:
            raise NoSuchJobError(job_id)
        if jobread.is_corrupt(job):
            if action == "delete":
                jobread.raw_delete(queue.connection, name, job.raw_id)
                return done(job_id, f"deleted (corrupt: {job.why})", queue=name)
            return refused(
                job_id, f"corrupt, not requeued ({job.why}): delete it, or inspect it on its page", queue=name
            )
        if action == "delete":
            if in_failed and (kept := lives_elsewhere(job, name)):
                queue.connection.zrem(keys.failed_key(name), job.id)  # issue 32: the job is not this queue's
                return done(job_id, f"taken off the failed list; job kept: {kept}", queue=name)
            with queue.connection.pipeline() as pipe:  # one round trip: off whichever band holds it, and gone
                for key in keys.band_keys(queue.key):
                    pipe.lrem(key, 0, job.id)
                job.delete(pipeline=pipe, remove_from_queue=False)
                pipe.execute()
            return done(job_id, "deleted", queue=name)
        if action == "requeue" and not in_failed:
            state = panel_state(job)
            return changed(job_id, state, f"it is not in the failed jobs of {name} (it is {state})", queue=name)
        if action == "enqueue" and not in_failed and _state(job) == "queued":
            return changed(job_id, "queued", "it is queued already", queue=name)
        requeue(queue, job, in_failed)  # one in the failed registry (stopped from the panel) leaves it
        return done(job_id, "requeued" if action == "requeue" else "enqueued", queue=name)
    except NoSuchJobError:
        return changed(job_id, "gone", f"no job {job_id!r} in Redis (deleted or expired)", queue=name)
    except InvalidJobOperation as exc:  # someone else took it out of the failed registry first
        return changed(job_id, "requeued", f"{type(exc).__name__}: {exc}", queue=name)
    except (redis.RedisError, QueueUnavailable) as exc:  # the door may answer 503 (``data["unavailable"]``)
        return refused(job_id, f"{type(exc).__name__}: {exc}", queue=name, data={"unavailable": True})


# --- many jobs at once: a chunk read in one round trip, acted on in one ---------------------------------


def run_many(action, queue, job_ids):
    """``action`` ("delete" or "requeue") on ``job_ids`` of ``queue``, ``CHUNK`` ids at a time -> (one Result
    per id, in order; the ids that were in the failed registry, whose dead-letter rows follow them).

    Each chunk costs four round trips whatever its size: WATCH of its jobs' hashes, their failed scores,
    their hashes, and one MULTI/EXEC with every write. Per job, the answer is ``run``'s: a job gone is
    "changed meanwhile: gone", a requeue of one no longer failed "changed meanwhile: <state>". A job that
    changes between the read and the write touches its hash, so the EXEC is refused (nothing written) and
    that chunk is done job by job (``run``), each re-read and answered on its own. Jobs the chunk does not
    handle (corrupt, running, rate-limited, in a group: rq's own delete reads more first) go through ``run``
    too."""
    results, failed = {}, set()
    for start in range(0, len(job_ids), CHUNK):
        chunk = list(dict.fromkeys(job_ids[start : start + CHUNK]))
        try:
            chunk_results, chunk_failed = _run_chunk(action, queue, chunk)
        except (redis.RedisError, QueueUnavailable) as exc:
            if not results:  # before anything was done: the door answers for all (the panel's 503)
                raise
            why = f"{type(exc).__name__}: {exc}"  # after: each job of the chunk says so
            chunk_results = {j: refused(j, why, queue=queue.name, data={"unavailable": True}) for j in chunk}
            chunk_failed = set()
        results.update(chunk_results)
        failed |= chunk_failed
    return [results[j] for j in job_ids], failed


def _run_chunk(action, queue, chunk):
    name = queue.name
    answers, slow, in_failed = {}, [], set()
    try:
        with queue.connection.pipeline() as pipe:
            pipe.watch(*(jobread.job_key(jobread.normal_id(j)) for j in chunk))
            in_failed = set(failed_ids(queue, chunk))
            read = jobread.fetch_many(chunk, queue.connection)
            pipe.multi()
            for job_id, job in zip(chunk, read):
                if job is None:
                    answers[job_id] = changed(
                        job_id, "gone", f"no job {job_id!r} in Redis (deleted or expired)", queue=name
                    )
                elif not _chunked(action, job):
                    slow.append(job_id)
                elif action == "requeue" and job_id not in in_failed:
                    state = panel_state(job)
                    why = f"it is not in the failed jobs of {name} (it is {state})"
                    answers[job_id] = changed(job_id, state, why, queue=name)
                else:
                    answers[job_id] = _write(action, queue, pipe, job_id, job, job_id in in_failed)
            if any(r.ok for r in answers.values()):
                pipe.execute()
    except redis.WatchError:  # a job changed since it was read: nothing written, each on its own
        answers, slow = {}, chunk
    if slow:
        slow_failed = set(failed_ids(queue, slow))
        in_failed = (in_failed - set(slow)) | slow_failed
        answers.update((j, run(action, queue, j, j in slow_failed)) for j in slow)
    return answers, {j for j in in_failed if answers[j].ok}


def _chunked(action, job):
    """Whether the chunk's pipeline does ``action`` to ``job`` itself (else ``run`` does, one job)."""
    if jobread.is_corrupt(job) or job.has_rate_limit:
        return False
    return action == "requeue" or (job.get_status(refresh=False) != "started" and not job.group_id)


def _write(action, queue, pipe, job_id, job, in_failed):
    """Queue on ``pipe`` (MULTI) what ``run`` does to ``job``, without its reads: they were the chunk's."""
    name = queue.name
    if action == "requeue":  # operations.requeue_failed, its ZREM inside the transaction
        pipe.zrem(keys.failed_key(name), job.id)
        push_back_into(pipe, job, queue.connection)
        return done(job_id, "requeued", queue=name)
    if in_failed and (kept := lives_elsewhere(job, name)):
        pipe.zrem(keys.failed_key(name), job.id)  # issue 32: the job is not this queue's
        return done(job_id, f"taken off the failed list; job kept: {kept}", queue=name)
    # rq's ``Job.delete`` (remove_from_queue=False) without its reads of the status and the executions: off
    # every band and every registry of its queue, its hash, dependency sets, results and executions gone.
    for key in keys.band_keys(queue.key):
        pipe.lrem(key, 0, job.id)
    for registry in (*REGISTRIES.values(), ReadyJobRegistry):
        if registry is not None and registry is not StartedJobRegistry:
            pipe.zrem(registry(job.origin, queue.connection).key, job.id)
    pipe.delete(job.key, job.dependents_key, job.dependencies_key, Result.get_key(job.id), job.execution_registry.key)
    return done(job_id, "deleted", queue=name)


def _cancel(job_id, queue=None):
    """``queues.cancel`` (the outbox's rows too; the job's batch told through the hook), unaudited: the
    service writes the row."""
    connection = getattr(queue, "connection", None)
    canceled = cancel(job_id, connection=connection)
    name = getattr(queue, "name", "") or ""
    if not name:
        job = jobread.fetch(job_id, connection or job_connection(job_id), check_origin=False)  # its own server
        name = getattr(job, "origin", "") or "" if job is not None and not jobread.is_corrupt(job) else ""
    if canceled.ok:
        return done(job_id, canceled.detail, queue=name, state=canceled.state)
    if canceled.outcome == "gone":
        return changed(job_id, "gone", canceled.detail, queue=name)
    return changed(job_id, canceled.state or canceled.outcome, canceled.detail, queue=name)


# --- every job of a queue in one state ----------------------------------------------------------------


def check_selection(state, func=""):
    """The state and function filter of a selection across pages, checked: (state, func)."""
    if state not in REGISTRIES:
        raise InvalidSelection(
            f"state={state!r} is not a state the jobs of a queue can be selected in: use one of "
            f"{', '.join(REGISTRIES)} (the tab the selection was made on)."
        )
    if len(func) > 200:
        raise InvalidSelection(
            f"func={func[:40]!r}... is {len(func)} characters long: a function filter is at most 200 "
            "(part of a dotted function path)."
        )
    return state, func.strip()


def select(queue, state, func=""):
    """Every job id of ``queue`` in ``state`` whose function path contains ``func`` (any, when empty), read in
    chunks of ``CHUNK`` ids: one round trip each, plus one when ``func`` filters (the chunk's hashes, read
    together). -> chunks (lists of ids) of the whole selection, read before anything is done to it: an
    action that takes jobs out of the list it walks would otherwise skip some."""
    state, func = check_selection(state, func)
    connection = queue.connection
    if REGISTRIES[state] is None:
        sources = [(key, "list") for key in keys.band_keys(queue.key)]
    else:
        sources = [(REGISTRIES[state](queue.name, connection).key, "zset")]
    found: list[str] = []
    for key, kind in sources:
        offset = 0
        while True:
            try:
                if kind == "list":
                    raw = connection.lrange(key, offset, offset + CHUNK - 1)
                else:
                    raw = connection.zrange(key, offset, offset + CHUNK - 1)
            except redis.ResponseError:  # a planted key of the wrong type holds no job of this state
                break
            if not raw:
                break
            offset += len(raw)
            ids = [jobread.text(r) for r in raw]
            if func:
                jobs = jobread.fetch_many(raw, connection)
                ids = [
                    i
                    for i, job in zip(ids, jobs)
                    if job is not None and not jobread.is_corrupt(job) and func.lower() in str(job.func_name).lower()
                ]
            found.extend(ids)
    return [found[start : start + CHUNK] for start in range(0, len(found), CHUNK)]
