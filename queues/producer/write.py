"""The Redis write of an enqueue: one function every enqueue's job reaches Redis through.

``write_job`` writes a built, signed job: queued now or scheduled, through its limit key
(queues/producer/limits.py), under its ``unique=`` key, waiting for replicas when asked
(queues/connection/replication.py); ``write_many`` a batch of them (``queues.enqueue_many``), all in
one MULTI. Both write the job's hash with ``batch_into``, one round trip, not rq's ``enqueue_job``.
``queues.enqueue`` (queues/producer/api.py) calls ``write_job`` for a direct enqueue, the outbox
(queues/producer/outbox.py) for its pushes and relays: a module of its own so that neither of those
two imports the other.
"""

import logging
import time
import weakref

import redis
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import timezone
from rq.exceptions import DuplicateJobError
from rq.job import validate_job_id

from queues import rqcompat
from queues.catalog.lookup import get_queue
from queues.connection import batch, replication
from queues.connection.clients import unavailable
from queues.exceptions import InvalidJob
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.keyspace import keys, quarantine
from queues.logsafe import escape
from queues.producer import limits
from queues.search import index as search_index

logger = logging.getLogger("queues.enqueueing")  # the name enqueue logs always had (log filters rely on it)

# Uniqueness (``unique=``): ``<prefix>:optima:unique:<queue>:<key>`` holds the id of the last job
# enqueued under the key. A new job is refused (the waiting one is returned) while that job is still
# waiting: queued, scheduled (delayed or waiting for a retry), deferred or held by its limit key
# (rq's ``rate_limited``). The check, the key and the job's write are one WATCH/MULTI transaction, so
# two concurrent enqueues cannot both pass.
UNIQUE_WAITING = ("queued", "scheduled", "deferred", "rate_limited")  # rate_limited: held by its limit key
UNIQUE_TTL = 7 * 24 * 3600  # seconds the key outlives its job's enqueue (plus any delay)


def write_job(queue, job, when, *, explicit_id=False, lock_key=None):
    """Write the built, signed ``job`` to Redis: queued now, or scheduled for ``when``.

    The one place an enqueue reaches Redis (direct enqueues, the outbox's push and relay). With
    ``lock_key`` (``unique=``) the job is written only if the key's job is no longer waiting:
    returns that job's id instead. ``explicit_id``: refuse to overwrite a job of the same id
    (``InvalidJob``). A Redis failure raises ``QueueUnavailable``. The job is pushed once, whatever
    key of the write is of the wrong type (``_execute_once``).
    """
    who = f"Enqueue of job {job.id}"

    def expected():
        return written_keys(queue, job, lock_key)

    try:
        with replication.acknowledged(queue) as q:
            if lock_key or limits.goes_through_limit(job):
                # Decided again at the write (the commit, inside a transaction): a duplicate enqueued
                # meanwhile — even by this same transaction — is dropped, not written. A job with a
                # limit key comes this way too (rq refuses unique=True for it, and holds it by the
                # second: queues/producer/limits.py).
                duplicate_of = _write_unique(q, job, when, lock_key, explicit_id, expected)
                if duplicate_of is not None:
                    logger.info(
                        "enqueue(%r, unique key %r): job %s not written, %s is still waiting",
                        q.name,
                        lock_key,
                        job.id,
                        duplicate_of,
                    )
                return duplicate_of
            if not rqcompat.is_async(q):
                _write_sync(q, job, when, explicit_id, expected)
                return None
            # One round trip, one MULTI (``batch_into``, the write of ``queues.enqueue_many``). rq's
            # enqueue_job sends the queue set's SADD in a pipeline of its own, then the job (status,
            # hash, push) in a second one: two round trips, and not one atomic step. An explicit id
            # is WATCHed and checked first (``_write_checked``): a job of that id is never overwritten.
            _write_checked(q, [job], when, explicit_id, expected, who=who)
            return None
    except DuplicateJobError:
        raise InvalidJob(f"A job with id {job.id!r} already exists in Redis; pick another job_id.") from None
    except redis.RedisError as exc:
        raise unavailable(exc, connection=queue.connection) from exc


def write_many(queue, jobs, when, *, explicit_ids=False):
    """Write the built, signed ``jobs`` (``queues.enqueue_many``) in one MULTI: all of them or none.

    One round trip for the batch; with ``explicit_ids`` (a caller's ``job_id``s, or the outbox's
    push) the ids are WATCHed and checked first (two more for the batch): one that exists already
    raises ``InvalidJob`` naming it, and nothing is written. A Redis failure raises ``QueueUnavailable``.
    Each job is pushed once, whatever key of the write is of the wrong type (``_execute_once``).
    """

    def expected():
        found = {}
        for job in jobs:
            found.update(written_keys(queue, job, None))
        return found

    try:
        with replication.acknowledged(queue) as q:
            _write_checked(q, jobs, when, explicit_ids, expected, who=f"Enqueue of {len(jobs)} jobs")
    except DuplicateJobError as exc:
        raise InvalidJob(
            f"Jobs with these ids already exist in Redis: {exc}; nothing of the batch was written. "
            "Pick other job_ids (or leave them out)."
        ) from None
    except redis.RedisError as exc:
        raise unavailable(exc, connection=queue.connection) from exc


def _write_checked(queue, jobs, when, explicit_ids, expected, *, who):
    """``batch_into`` in one MULTI; with ``explicit_ids``, the job keys WATCHed and checked first: an
    id that exists raises ``DuplicateJobError`` naming it (rq's ``unique=True``), nothing written."""
    with queue.connection.pipeline() as pipe:
        while True:
            try:
                if explicit_ids:
                    pipe.watch(*[job.key for job in jobs])
                    if pipe.exists(*[job.key for job in jobs]):
                        taken = [job.id for job in jobs if pipe.exists(job.key)]  # rare: one by one
                        pipe.unwatch()
                        raise DuplicateJobError(", ".join(taken))
                    pipe.multi()
                batch_into(queue, jobs, when, pipe)
                _execute_once(queue.connection, pipe, expected, who=who)
                return
            except redis.WatchError:
                continue


def _write_sync(queue, job, when, explicit_id, expected):
    """A queue built ``is_async=False`` runs the job in this call: rq's path (its Lua, which takes no
    pipeline, checks an explicit id), then the search index. Nothing of it is sent twice, since a
    second send would run the job again: the keys of the wrong type are set aside first (one
    pipelined TYPE: a queue that runs its jobs in the caller is no production path)."""
    quarantine.set_aside(queue.connection, expected(), who=f"Enqueue of job {job.id}")
    if when is None:
        queue.enqueue_job(job, unique=explicit_id)
    else:
        queue.schedule_job(job, when, unique=explicit_id)
    with queue.connection.pipeline() as pipe:  # rq's Lua takes no pipeline: the index on its own
        search_index.add_into(pipe, queue.name, [job])
        _execute_once(queue.connection, pipe, expected, who=f"Enqueue of job {job.id}")


# The type each command of an enqueue's MULTI expects of its key (its first argument): a failed one
# names its key even when the table of ``written_keys`` does not (a Lua script's keys are in it).
_COMMAND_TYPES = {
    "RPUSH": "list",
    "LPUSH": "list",
    "ZADD": "zset",
    "ZREM": "zset",
    "SADD": "set",
    "SREM": "set",
    "HSET": "hash",
    "HMSET": "hash",
    "HDEL": "hash",
}


def _execute_once(connection, pipe, expected, *, who):
    """EXEC the MULTI queued on ``pipe`` so that each of its commands takes effect once.

    A command that meets a key of another type (``SET <key> x`` by whoever writes to Redis) fails
    alone: Redis runs the transaction's other commands, the job's push among them. So the whole
    write is never sent again (that pushed the job twice: issue 32, finding 11). The keys of
    ``expected()`` ({key: type}) and of the failed commands that hold another type are renamed
    aside (``quarantine.set_aside``, one ERROR each), and the failed commands alone are sent once
    more, in their order: a push that failed is made then, one that succeeded never again. A limit
    key's promotion (rq's Lua) that stopped after taking a job from the held set gives that job back
    first (``limits.put_back_unpushed``). An error that is no wrong type, or a failed command that
    fails again, raises (a ``RedisError``: the caller's ``QueueUnavailable``), never a WRONGTYPE
    that a caller's ``retry_once`` would answer with the whole write again."""
    stack = [(args, dict(options)) for args, options in pipe.command_stack]
    if batch.runs_as_a_script(pipe):  # MULTI ... EXEC read back raw: a third less Redis CPU than the script (issue 36)
        replies = batch.execute_each(connection, pipe, multi=True)
    else:
        replies = pipe.execute(raise_on_error=False)
    failed = [(stack[i], reply) for i, reply in enumerate(replies) if isinstance(reply, Exception)]
    if not failed:
        return replies
    other = [reply for _, reply in failed if not quarantine.is_wrong_type(reply)]
    if other:
        raise other[0]
    wanted = dict(expected())
    for (args, _options), _reply in failed:
        kind = _COMMAND_TYPES.get(str(args[0]).upper())
        if kind is not None:
            wanted.setdefault(_text(args[1]), kind)
        elif str(args[0]).upper() == "EVALSHA":
            for key in args[3 : 3 + int(args[2])]:
                wanted.setdefault(_text(key), "zset")  # rq's limit Lua: the slots and the held jobs
    quarantine.set_aside(connection, wanted, who=who)
    with connection.pipeline() as again:
        for (args, options), _reply in failed:
            if str(args[0]).upper() == "EVALSHA":  # rq's limit promotion: KEYS = slots, held jobs
                limits.put_back_unpushed(connection, _text(args[3]), _text(args[4]))
            again.execute_command(*args, **options)
        replies_again = again.execute(raise_on_error=False)
    still = [reply for reply in replies_again if isinstance(reply, Exception)]
    if still:
        raise redis.RedisError(
            f"{who}: {len(still)} of its writes failed again after the keys of the wrong type were set "
            f"aside ({still[0]}); the job's push was made once."
        )
    return replies


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def batch_into(queue, jobs, when, pipe):
    """Queue on ``pipe`` (a MULTI) the write of ``jobs``, queued now or scheduled for ``when``.

    rq's own steps (``Queue._prepare_for_queue``, ``_persist_job``, ``push_job_id``, ``schedule_job``),
    written here once per batch where rq repeats them per job: rq's ``enqueue_job`` sends, for each
    job, the queue set's SADD, an HSET of the status, the HSET of the whole hash (which holds the
    status again) and an RPUSH. In a 100-job MULTI the client spends more on packing those 400
    commands (redis-py packs each argument in Python) and reading their replies than on building and
    signing the jobs. Here: one HSET per job, and for the batch one SADD and one RPUSH per band (or
    one ZADD). A job with a limit key goes through its limit as
    a single enqueue does (``limits.enqueue_into``, rq's promotion Lua), in the same MULTI.
    """
    from rq.job import JobStatus  # no cycle: these four to the top once issue 32's edits here are merged
    from rq.registry import ScheduledJobRegistry
    from rq.utils import now

    from queues.catalog.classes import mark_banded  # no cycle: to the top once issue 32's edits here are merged

    version = queue.get_redis_server_version()
    queue_set_into(pipe, queue)
    search_index.add_into(pipe, queue.name, jobs)  # the search index, in the same MULTI (search/index.py)
    status = JobStatus.QUEUED if when is None else JobStatus.SCHEDULED
    enqueued_at = now() if when is None else None
    bands = {}
    stamp, due = time.time(), None if when is None else when.timestamp()
    for job in jobs:
        jobmeta.stamp_enqueued(job.meta, stamp, due)  # the wait/total histograms' start (jobs/meta.py)
        if when is None and limits.goes_through_limit(job):
            limits.enqueue_into(queue, job, pipe)
            continue
        job.redis_server_version = version  # the rest of rq's _prepare_for_queue (create_job set the timeout)
        job.origin = queue.name
        if enqueued_at is not None:
            job.enqueued_at = enqueued_at
        rqcompat.set_status_in_hash(job, status)
        # The fields rq writes as '' (not started, no worker, no callbacks: 7 of a new job's 18) are left
        # out: rq's ``Job.restore`` reads a missing field as it reads '' (``obj.get``), as every reader
        # here does (HMGET ... or b""), and they are a third of what redis-py packs per job.
        pipe.hset(job.key, mapping={k: v for k, v in job.to_dict().items() if v != ""})
        if job.ttl:
            job.cleanup(ttl=job.ttl, pipeline=pipe)
        bands.setdefault(jobmeta.band(job), []).append(job.id)
    if when is not None:
        score = int(when.timestamp())  # rq's ScheduledJobRegistry.schedule: whole seconds, UTC
        pipe.zadd(ScheduledJobRegistry(queue=queue).key, {job_id: score for ids in bands.values() for job_id in ids})
        return
    for band, ids in bands.items():
        if band != jobmeta.NORMAL:
            mark_banded(pipe, queue.name)
        pipe.rpush(keys.band_key(queue.key, band), *ids)


QUEUE_SET_EVERY_SECONDS = 60.0
_queue_set_at: "weakref.WeakKeyDictionary[object, dict[str, float]]" = weakref.WeakKeyDictionary()


def queue_set_into(pipe, queue):
    """rq's SADD of the queue's key into ``<prefix>:queues`` (what rq's ``Queue.all`` and reconcile's undeclared
    queues read), queued on ``pipe`` at most once every ``QUEUE_SET_EVERY_SECONDS`` a queue from this process to
    each Redis (its client's pool: another server, or the same one reached anew, is written again), not with every
    enqueue as rq does: a command a job fewer (issue 36). The set only ever gains a queue from an enqueue, so a
    write skipped repeats one that landed; a queue taken out of it (the panel's delete of a queue, a Redis that
    lost its data) is in it again within the minute, once it gets a job."""
    written = _queue_set_at.get(queue.connection.connection_pool)
    if written is None:
        written = _queue_set_at[queue.connection.connection_pool] = {}
    moment = time.monotonic()
    if moment - written.get(queue.key, -QUEUE_SET_EVERY_SECONDS) < QUEUE_SET_EVERY_SECONDS:
        return
    written[queue.key] = moment
    pipe.sadd(queue.redis_queues_keys, queue.key)


def written_keys(queue, job, lock_key):
    """{key: Redis type} of what ``write_job`` writes (``queues.keyspace.quarantine``)."""
    written = {
        queue.redis_queues_keys: "set",
        keys.band_key(queue.key, jobmeta.band(job)): "list",
        keys.scheduled_key(queue.name): "zset",
        job.key: "hash",
        **search_index.written_keys(queue.name, [job]),
    }
    if lock_key:
        written[lock_key] = "string"
    if limits.is_limited(job):
        written.update(quarantine.limit(job.rate_limit_key))
        written[keys.limit_keys_key()] = "set"
    return written


# name -> (QueueConfig, OptimaQueue). Building an RQ Queue (a dozen attributes, a serializer check,
# the client lookup) costs more than the rest of the Python side of an enqueue, and nothing in it
# changes between enqueues. Built again when the declarations were (a new QueueConfig) and after any
# setting change (override_settings, the test ``settings`` fixture: a new Redis URL or timeouts).
_queues: dict[str, tuple[object, object]] = {}


def declared_queue(name, config):
    """The OptimaQueue of the declared queue ``name`` (``config``: its QueueConfig)."""
    cached = _queues.get(name)
    if cached is not None and cached[0] is config:
        return cached[1]
    queue = get_queue(name)  # on the Redis server the queue lives on (queues/connection/servers.py)
    _queues[name] = (config, queue)
    return queue


@receiver(setting_changed)
def _forget_queues(**kwargs):
    _queues.clear()


def waiting_unique(queue, lock_key):
    """The still-waiting Job holding ``lock_key``, or None (also when the key holds something that is
    not a readable job: the write replaces it, ``_write_unique``)."""
    try:
        holder, waiting, _why = _unique_holder(queue.connection, lock_key)
        job = jobread.fetch(holder, queue.connection) if waiting else None
    except redis.RedisError as exc:
        raise unavailable(exc, connection=queue.connection) from exc
    return None if job is None or jobread.is_corrupt(job) else job


def _unique_holder(connection, lock_key):
    """``(holder, waiting, why)`` of ``lock_key``: the job id it holds (None: no key), whether that
    job is still waiting (``UNIQUE_WAITING``), and why the holder is no job at all (None: it is one).

    Anyone who can write to Redis can plant the key: an id rq rejects, bytes that are not UTF-8 or
    a job key that is no hash are no waiting job, never an exception."""
    try:
        raw = connection.get(lock_key)
    except redis.ResponseError as exc:
        if not quarantine.is_wrong_type(exc):
            raise
        return None, False, "a key of another type than a string (WRONGTYPE)"
    if raw is None:
        return None, False, None
    try:
        holder = raw.decode() if isinstance(raw, bytes) else raw
        validate_job_id(holder)
    except (UnicodeDecodeError, ValueError):
        return raw, False, "an id rq rejects (letters, digits, '_' and '-' only)"
    try:
        status = connection.hget(keys.job_key(holder), "status")
    except redis.ResponseError:
        return holder, False, "an id whose job key is not a hash"
    return holder, (status or b"").decode("utf-8", "replace") in UNIQUE_WAITING, None


def _write_unique(queue, job, when, lock_key, explicit_id, expected):
    """Write ``job`` and point ``lock_key`` at it in one transaction, unless the job the key points
    at is still waiting: then write nothing and return that job's id. ``lock_key`` None (a job with
    a limit key and no ``unique=``): only the ``explicit_id`` check.

    A job with a limit key goes through its limit in the same MULTI (``limits.enqueue_into``: rq's
    pipelined path, whose promotion Lua runs inside the transaction), so the uniqueness check, the
    hold and the push are one atomic step; a delayed one goes through it when due (rq's scheduler).
    A key holding no job (``_unique_holder``) is reported here, where it is replaced: once."""
    ttl = UNIQUE_TTL
    if when is not None:
        ttl += max(0, int((when - timezone.now()).total_seconds()))
    watched = [k for k in (lock_key, job.key) if k]
    with queue.connection.pipeline() as pipe:
        while True:
            try:
                pipe.watch(*watched)
                holder, waiting, why = _unique_holder(pipe, lock_key) if lock_key else (None, False, None)
                if waiting and holder != job.id:
                    pipe.unwatch()
                    return holder
                if explicit_id and pipe.exists(job.key):
                    pipe.unwatch()
                    raise DuplicateJobError(job.id)
                pipe.multi()
                search_index.add_into(pipe, queue.name, [job])
                if lock_key:
                    pipe.set(lock_key, job.id, ex=ttl)
                if when is not None:
                    queue.schedule_job(job, when, pipeline=pipe)
                elif limits.goes_through_limit(job):
                    limits.enqueue_into(queue, job, pipe)
                else:
                    queue.enqueue_job(job, pipeline=pipe)
                _execute_once(queue.connection, pipe, expected, who=f"Enqueue of job {job.id}")
                if why is not None:
                    logger.error(
                        "unique key %s held %r, %s: treated as no waiting job, replaced by job %s",
                        escape(lock_key),
                        holder,
                        why,
                        job.id,
                    )
                return None
            except redis.WatchError:
                continue
