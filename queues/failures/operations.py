"""What an operator can do to dead letters and jobs; each function acts on one object.

Retry of a dead letter:
  - its job is still in the queue's failed registry -> requeue that very job (same id, so if it
    dies again the lifecycle mirror reopens this row and counts ``times_dead``); the worker gives
    a requeued dead job a full set of attempts again (``queues.failures.retry``);
  - otherwise (discarded, deleted from the panel, expired) -> enqueue a new job from the stored
    ``func_path``/``args``/``kwargs`` through ``queues.enqueue_call``, with ``meta.retry_of`` set to the
    old id, and link the row to it (``retried_as``).
Discard: remove the job from the failed registry and delete it from Redis; the row stays, marked
``discarded`` (it remains searchable and can still be retried from its stored arguments). A job whose
hash belongs to another queue, or that is live (queued, scheduled, deferred, started), is kept: the
discard then closes the dead letter only (issue 32: an id planted in another queue's list).
A corrupt dead letter (reason ``corrupt``: its hash could not be read as a job) has nothing to run:
retry is refused; discard deletes its hash and failed-registry entry like any other. So is the retry
of a ``not_a_job`` one (its function is no declared job).

Never verified (``NEVER_VERIFIED``): an ``unsigned`` row (the worker's gate refused its job) and an
``unverified`` one (reconcile found it in a failed registry without a valid signature) hold a
function and arguments nobody verified, and a retry signs them. So ``retry_dead_letter`` skips them
unless called with ``accept_unverified=True``, which only the admin's one-row retry passes, once the
operator confirmed on a page showing the function and the arguments; bulk and group actions never
do. Accepted, such a row is retried as a new signed job from what the operator saw, never in place.

Cancelling a job that has not started: ``queues/producer/cancel.py`` (the panel and ``DELETE /jobs/<id>/``).

Their one caller is the operator service (``queues/operator/deadletters.py``), which every door (the admin's
actions, the panel, the API) goes through: it checks the permission and writes one audit row per object.
"""

import functools
import json
from dataclasses import dataclass

import redis
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django_rq.utils import requeue_job
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job
from rq.registry import (
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
)

from queues import conf, rqcompat
from queues.catalog.lookup import OptimaJob, OptimaQueue, get_queue, queue_names
from queues.connection import clients
from queues.connection.clients import get_connection, unavailable
from queues.events import hooks
from queues.exceptions import InvalidJob, QueuesError
from queues.failures.corrupt import CORRUPT
from queues.failures.mirror import args_cut, carried
from queues.failures.unverified import UNVERIFIED
from queues.jobs import capped
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.jobs.gate import NOT_A_JOB, UNSIGNED
from queues.keyspace import entries, keys
from queues.models import DeadLetter
from queues.producer import limits
from queues.producer.api import enqueue_fail_fast
from queues.producer.cancel import cancel_job

NEVER_VERIFIED = frozenset({UNSIGNED, UNVERIFIED})  # reasons of rows whose function and arguments nobody verified


@dataclass(frozen=True)
class Outcome:
    outcome: str  # "ok", "error" or "skipped"
    detail: str
    job_id: str = ""  # the job that now runs, when one does
    unverified: bool = False  # skipped because the row was never verified (NEVER_VERIFIED)


def queue_connection(name):
    """The client of the Redis server the queue ``name`` lives on; a queue no longer declared: the default
    server's (where every queue lived before QUEUES_REDIS_SERVERS)."""
    return clients.queue_connection(name) if name in queue_names() else get_connection()


def _failed_registry(queue):
    return FailedJobRegistry(queue=queue, job_class=OptimaJob)


def retry_dead_letter(row_id, *, accept_unverified=False):
    """Retry the DeadLetter ``row_id`` (see the module docstring). Returns an Outcome.

    A row never verified (``NEVER_VERIFIED``) is skipped (``Outcome.unverified``) unless
    ``accept_unverified``: the operator confirmed its function and arguments, shown to them alone.

    Redis first, then the row: the row becomes ``retried`` only once its job is in Redis. If Redis
    refuses, the row stays open and the Outcome's detail names the masked Redis URL. (Before, the
    enqueue ran inside the row's transaction, so it was written at the commit: a Redis failure then
    left a ``retried`` row pointing at a job never written, out of reconcile's sight.)

    Called inside a caller's transaction, ``enqueue_call`` writes at its commit; the row's update is
    then registered with ``on_commit`` after that write, so it runs only if the write did (Django
    runs commit callbacks in order and stops at the first that raises).

    Two operators retrying the same row at once may both write; the second finds the row already
    retried, deletes the job it wrote (when it is a new one) and reports "skipped".
    """

    row = DeadLetter.objects.get(pk=row_id)
    if row.reason == CORRUPT:
        return Outcome(
            "error",
            f"Dead letter of job {row.job_id} not retried: the job is corrupt ({row.exc_message}), "
            "so there is nothing to run. Discard it.",
        )
    if row.reason == NOT_A_JOB:
        return Outcome(
            "error",
            f"Dead letter of job {row.job_id} not retried: it names {row.func_path!r}, which is "
            "not a declared job, so it would never run. Discard it (and find out who wrote it).",
        )
    if row.reason in NEVER_VERIFIED and not accept_unverified:
        return Outcome(
            "skipped",
            f"Dead letter of job {row.job_id} not retried: its function and arguments were "
            f"never verified (reason {row.reason}). Retry it on its own from its page, which "
            "shows them.",
            unverified=True,
        )
    if row.status == DeadLetter.Status.RETRIED:
        return Outcome("skipped", f"already retried as {row.retried_as or row.job_id}; nothing done")
    at_commit = transaction.get_connection().in_atomic_block
    try:
        new_id, detail = _put_back(row)
    except (QueuesError, NoSuchJobError, InvalidJobOperation) as exc:
        return Outcome("error", f"{type(exc).__name__}: {exc} (the dead letter stays open)")
    if row.reason in NEVER_VERIFIED:
        detail = (
            f"{row.reason} dead letter retried as the operator confirmed: {row.func_path} with its stored "
            f"arguments, not verified, now signed; {detail}"
        )
    if at_commit:
        transaction.on_commit(functools.partial(_mark_retried, row_id, new_id))
        return Outcome("ok", f"{detail} (written at the commit of the caller's transaction)", new_id)
    if not _mark_retried(row_id, new_id):
        if new_id != row.job_id:
            delete_job_hash(new_id, queue_connection(row.queue))
        return Outcome(
            "skipped",
            f"retried meanwhile by someone else; the job {new_id} written for it was deleted"
            if new_id != row.job_id
            else "retried meanwhile by someone else",
        )
    return Outcome("ok", detail, new_id)


def _put_back(row):
    """Write ``row``'s job back to Redis: (the job id that now runs, detail). Raises QueuesError
    (QueueUnavailable with the masked URL when Redis fails), NoSuchJobError, InvalidJobOperation."""

    try:
        queue = get_queue(row.queue)
        registry = _failed_registry(queue)
        # A job never verified is not requeued as it is in Redis (which anyone able to write there may
        # have changed since the operator looked): a new job is signed from what they saw in the row.
        if row.reason not in NEVER_VERIFIED and row.job_id in registry:
            requeue_failed(registry, row.job_id)
            return row.job_id, "requeued the failed job in place"
    except redis.RedisError as exc:
        raise unavailable(exc) from exc
    if args_cut(row):
        # The row kept only the start of arguments too large to store (mirror.capped_arguments): a job
        # rebuilt from it would run with the placeholder, not with what the job was given.
        raise InvalidJob(
            f"the job is no longer in Redis and its dead letter kept only the start of its "
            f"arguments (over {entries.ARGS_CHARS} characters of JSON), so it cannot be rebuilt; discard it"
        )
    # Fail-fast, not through the outbox: the row says "retried" only once the job is in Redis. Its
    # owner, limit key and priority come back from the row (mirror.carried): the new job is still the
    # owner's, still counts against the owner's limit, and goes back to its priority band.
    kept = carried(row)
    priority = kept.get("priority")  # anything but a non-zero int (a row edited by hand): the normal band
    meta = {jobmeta.RETRY_OF: row.job_id}
    if isinstance(kept.get("owner"), str):
        meta[jobmeta.OWNER] = kept["owner"]
    if isinstance(kept.get("batch"), str):
        # Its batch's member in the dead one's place: its success or death is counted as the old one's would
        # have been (queues/workflows/scripts.py, ``take_over``), and a chain stopped at it goes on.
        meta[jobmeta.BATCH] = kept["batch"]
    job = enqueue_fail_fast(
        row.queue,
        row.func_path,
        args=list(row.args or []),
        kwargs=dict(row.kwargs or {}),
        meta=meta,
        limit_key=kept.get("limit_key"),
        limit_concurrency=kept.get("limit_concurrency"),
        priority=priority if jobmeta.band_of(priority) != jobmeta.NORMAL else 0,
    )
    return job.id, f"job no longer in the failed registry: enqueued new job {job.id}"


def _mark_retried(row_id, new_id):
    """The row -> retried as ``new_id``, unless it already was; returns whether it changed."""

    return bool(
        DeadLetter.objects.filter(pk=row_id)
        .exclude(status=DeadLetter.Status.RETRIED)
        .update(status=DeadLetter.Status.RETRIED, retried_as=new_id, updated_at=timezone.now())
    )


def discard_dead_letter(row_id):
    """Discard the DeadLetter ``row_id``: out of the failed registry, job deleted, row kept."""

    with transaction.atomic():
        row = DeadLetter.objects.select_for_update().get(pk=row_id)
        if row.status not in (DeadLetter.Status.OPEN, DeadLetter.Status.STOPPED):  # stopped: by an operator
            return Outcome("skipped", f"status is {row.status}; only open or stopped dead letters are discarded")
        # No declared queue needed: a queue removed from the settings still has its registry in Redis.
        connection = queue_connection(row.queue)
        try:
            removed = FailedJobRegistry(row.queue, connection=connection, job_class=OptimaJob).remove(row.job_id)
        except redis.ResponseError:  # the registry key is not a sorted set: nothing of this job in it
            removed = False
        dead = jobread.fetch(row.job_id, connection, check_origin=False)
        elsewhere = _lives_elsewhere(row, connection)
        deleted = False if elsewhere else delete_job_hash(row.job_id, connection)
        detail = ("removed from the failed registry" if removed else "was not in the failed registry") + (
            f", job kept: {elsewhere}" if elsewhere else ", job deleted" if deleted else ", job hash already gone"
        )
        row.status = DeadLetter.Status.DISCARDED
        row.save(update_fields=["status", "updated_at"])
    if dead is not None and not jobread.is_corrupt(dead) and not elsewhere:
        hooks.after_discard(dead, row.queue)  # e.g. the chain whose step it was is canceled (queues/workflows/)
    return Outcome("ok", detail)


def _lives_elsewhere(row, connection):
    """Why the job of dead letter ``row`` must outlive its discard, or "" (``lives_elsewhere``). A hash
    that cannot be read as a job is deleted as before."""
    job = jobread.fetch(row.job_id, connection, check_origin=False)
    if job is None or jobread.is_corrupt(job):
        return ""
    return lives_elsewhere(job, row.queue)


def lives_elsewhere(job, queue_name):
    """Why ``job`` (read, not corrupt), listed failed in ``queue_name``, must outlive a discard or a delete
    of the failed jobs of that queue, or "": its hash belongs to another queue, or it is live (queued,
    scheduled, deferred, started) — an id planted in another queue's list was dead-lettered there (issue 32):
    the discard closes the dead letter, and takes the id off that failed registry, only."""
    origin = job.origin if isinstance(job.origin, str) else ""
    status = job.get_status(refresh=False)
    status = str(getattr(status, "value", status) or "")
    if origin and origin != queue_name:
        return f"it belongs to queue {origin} (status {status or 'unknown'})"
    if status in ("queued", "scheduled", "deferred", "started"):
        return f"it is {status} in queue {origin or queue_name}"
    return ""


def requeue(queue, job, in_failed):
    """Put ``job`` back on ``queue`` (the panel's requeue and enqueue); one in the failed registry
    (``in_failed``) leaves it first (rq's ``FailedJobRegistry.requeue``: ZREM, then enqueue). django-rq
    maps only the status ``failed`` to that registry: a job stopped from the panel (``stopped``) ran
    again while still listed failed, its dead letter open."""

    if in_failed:
        requeue_failed(FailedJobRegistry(queue=queue, job_class=type(job)), job)
    elif limits.goes_through_limit(job):
        _enqueue_through_limit(queue, job)
    else:
        requeue_job(queue, job)


def _enqueue_through_limit(queue, job):
    """django-rq's ``requeue_job`` (off the registry its status names, pushed onto ``queue``) for a job with a
    limit key: through its limit instead of straight onto the queue (``limits.enqueue_into``), in one MULTI."""
    registry = {
        "deferred": DeferredJobRegistry,
        "finished": FinishedJobRegistry,
        "scheduled": ScheduledJobRegistry,
        "failed": FailedJobRegistry,
    }.get(str(getattr(status := job.get_status(refresh=False), "value", status) or ""))
    with queue.connection.pipeline() as pipeline:
        limits.enqueue_into(queue, job, pipeline)
        if registry is not None:
            registry(queue.name, connection=queue.connection).remove(job, pipeline=pipeline)
        pipeline.execute()


def requeue_failed(registry, job_or_id):
    """rq's ``FailedJobRegistry.requeue`` (ZREM — InvalidJobOperation when someone else took the job
    first —, then the push), the push through ``OptimaQueue``: rq's builds a plain ``rq.Queue``, whose
    push ignores the job's priority band (``jobs.meta.band``), and rq's knows a limit key's concurrency but
    not its rate (queues/producer/rates.py): a job with a limit key (which has no band) comes back through
    its limit here (``push_back_into``). A plain job of the normal band keeps rq's own requeue. -> the job."""
    job = job_or_id
    if not isinstance(job, Job):
        job = registry.job_class.fetch(job_or_id, connection=registry.connection, serializer=registry.serializer)
    if jobmeta.band(job) == jobmeta.NORMAL and not limits.goes_through_limit(job):
        return registry.requeue(job)
    if not registry.connection.zrem(registry.key, job.id):
        raise InvalidJobOperation(f"job {job.id} is no longer in {registry.key}")
    with registry.connection.pipeline() as pipeline:
        push_back_into(pipeline, job, registry.connection)
        pipeline.execute()
    return job


def push_back_into(pipeline, job, connection):
    """What a requeue of a failed job writes once it is off the failed registry, queued on ``pipeline``: its
    times and error cleared, a job of a priority band marked put back (the push says so: gate.replayed), and
    the push through ``OptimaQueue`` (its band's list) — or, for a job with a limit key, the write through its
    limit (``limits.enqueue_into``: held by its rate, its concurrency, or both, as at its enqueue; rq's own
    requeue held a concurrency-limited job the same way, but knew no rate). ``requeue_failed`` and the
    operator's chunked requeue (queues/operator/jobs.py, the ZREM inside the same MULTI) share it; "Requeue
    All" (queues/operator/queues_wide.py) goes through the limit the same way."""
    job.started_at = None
    job.ended_at = None
    rqcompat.clear_exc_info(job)
    queue = OptimaQueue(job.origin, connection=connection)
    if limits.goes_through_limit(job):
        limits.enqueue_into(queue, job, pipeline)
        return
    if jobmeta.band(job) != jobmeta.NORMAL:
        pipeline.hset(job.key, jobmeta.PUT_BACK, jobmeta.PUT_BACK_REQUEUE)
    rqcompat.enqueue_prepared(queue, job, pipeline)


def delete_job_hash(job_id, connection=None):
    """Delete a job and what rq keeps with it; False when it was already gone. A corrupt job's hash
    (and results) are deleted as they are, nothing in them read."""
    connection = connection or get_connection()
    job = jobread.fetch(job_id, connection, check_origin=False)
    if job is None:
        return False
    if jobread.is_corrupt(job):
        with connection.pipeline(transaction=False) as pipe:
            jobread.delete_keys(pipe, job_id)
            pipe.execute()
        return True
    job.delete()
    return True


def mark_dead_letters(job_ids, status, retried_as_self=False):
    """Rows of ``job_ids`` still open -> ``status`` (after the panel requeued or deleted the jobs)."""

    job_ids = list(job_ids)
    if not job_ids:
        return 0
    updates = {"status": status, "updated_at": timezone.now()}
    total = 0
    for start in range(0, len(job_ids), 500):
        chunk = job_ids[start : start + 500]
        rows = DeadLetter.objects.filter(prefix=conf.prefix(), job_id__in=chunk, status=DeadLetter.Status.OPEN)
        if retried_as_self:
            total += rows.update(retried_as=F("job_id"), **updates)
        else:
            total += rows.update(**updates)
    return total


# --- finding a job -------------------------------------------------------------------------------

_REGISTRIES = (
    ("failed", FailedJobRegistry),
    ("finished", FinishedJobRegistry),
    ("scheduled", ScheduledJobRegistry),
    ("deferred", DeferredJobRegistry),
    ("canceled", CanceledJobRegistry),
)


def find_job(job_id, connection=None):
    """Where ``job_id`` is, across every declared queue and registry, in two round trips.

    Returns {"job_id", "exists", "corrupt" (why, or ""), "origin", "status", "description",
    "locations": [(queue, place)]}; every value printable (bytes that are not UTF-8 escaped).
    """
    connection = connection or get_connection()
    names = queue_names()
    rid = jobread.normal_id(job_id)  # an id shown escaped (not UTF-8) is looked up as Redis holds it
    with connection.pipeline(transaction=False) as pipe:
        jobread.read_hash(pipe, rid)
        for name in names:
            queue = get_queue(name, connection=connection)
            for key in keys.band_keys(queue.key):  # queued: in one of its priority bands
                pipe.lpos(key, rid)
            for _, cls in _REGISTRIES:
                pipe.zscore(cls(name, connection=connection).key, rid)
        # A key of the wrong type (the job's, a queue's, a registry's) is an answer, not a failure.
        replies = pipe.execute(raise_on_error=False)
    replies[0] = capped.hash_of(replies[0])
    job = jobread.load(rid, replies[0], connection)
    replies = [None if isinstance(r, redis.ResponseError) else r for r in replies]
    raw = {jobread.text(k): jobread.text(v) for k, v in (replies[0] or {}).items()}
    origin, status, description, enqueued_at, ended_at, meta = (
        raw.get(f) for f in ("origin", "status", "description", "enqueued_at", "ended_at", "meta")
    )
    locations = []
    i = 1
    bands = len(jobmeta.BANDS)
    for name in names:
        if any(reply is not None for reply in replies[i : i + bands]):
            locations.append((name, "queued"))
        i += bands
        for place, _ in _REGISTRIES:
            if replies[i] is not None:
                locations.append((name, place))
            i += 1
    if status == "started" and origin:
        locations.append((origin, "started"))
    return {
        "job_id": job_id,
        "exists": job is not None,
        "corrupt": job.why if jobread.is_corrupt(job) else "",
        "origin": origin,
        "status": status,
        "description": description,
        "enqueued_at": enqueued_at,
        "ended_at": ended_at,
        "locations": locations,
        "retry_of": _retry_of(meta),
    }


def _retry_of(raw_meta):
    """The dead job this one was enqueued to retry (``meta.retry_of``), or None."""
    try:
        meta = json.loads(raw_meta) if raw_meta else {}
    except ValueError:
        return None
    value = meta.get(jobmeta.RETRY_OF) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None


def cancel_retry(row_id):
    """Cancel the job that retrying the DeadLetter ``row_id`` put back, while it still waits
    (``queues.producer.cancel``); the row is then marked ``discarded``. Returns an Outcome."""

    row = DeadLetter.objects.get(pk=row_id)
    if row.status != DeadLetter.Status.RETRIED:
        return Outcome("skipped", f"dead letter of job {row.job_id} is {row.status}, not retried: no retry to cancel")
    job_id = row.retried_as or row.job_id
    try:
        canceled = cancel_job(job_id)
    except redis.RedisError as exc:
        return Outcome("error", f"{unavailable(exc)} (nothing canceled)")
    if not canceled.ok:
        return Outcome("error", f"retry {job_id} of dead letter {row.job_id} not canceled: {canceled.detail}")
    DeadLetter.objects.filter(pk=row_id, status=DeadLetter.Status.RETRIED).update(
        status=DeadLetter.Status.DISCARDED, updated_at=timezone.now()
    )
    return Outcome("ok", f"canceled retry {job_id}: {canceled.detail}", job_id)
