"""Fairness: at most N jobs sharing a limit key are queued or running at once (issue 12, item 4).

``queues.enqueue(..., limit_key="seller:42", limit_concurrency=2)`` (the concurrency defaults to the
queue option ``limit_concurrency``). A job over the limit is *held*: it waits outside its queue, so
the jobs of other keys behind it in the queue are taken by workers first, and it is pushed to the
queue's tail, oldest first, when a job of its key frees a slot by ending in any way.

This is rq 3.0's own ``RateLimit``, adapted (docs/decisions.md, "Limit keys"): its Lua promotes a
held job by pushing it onto the queue list, which our LMOVE dequeue (worker/dequeue.py) takes as
any other job, and rq's worker releases the slot of a job that succeeded or failed for good, its
scheduler sends a due job back through the limit, its registries' ``requeue`` (the panel's, the
dead-letter admin's retry) too, ``Job.cancel``/``delete`` free the slot, and its maintenance
(``clean_registries``, run by our workers every ``maintenance_interval``) frees the slots of jobs
that vanished or ended without saying so. What rq refuses — a rate-limited job written on a
pipeline (our ``unique=`` enqueue, WATCH/MULTI) or with ``unique=True`` (our explicit ``job_id``) —
is done here with rq's public ``RateLimitRegistry`` on our pipeline (``enqueue_into``, the steps of
rq's ``_enqueue_rate_limited_job``); the re-queue paths rq does not know (our retries, the
abandoned-job scan, cancel) use ``release_into``, ``requeue_into`` and ``release``.

The key is scoped to its queue: rq's key is ``<queue>:<limit_key>``. Keys (rq's, ``<p>`` =
QUEUE_PREFIX; queues/keyspace/keys.py lists them):

- ``<p>:rl-keys``: set of the scoped keys in use (rq removes a key once it has no job);
- ``<p>:rl:<queue>:<key>``: hash, ``concurrency`` (the latest enqueue's);
- ``<p>:rl:<queue>:<key>:allowed``: zset of the job ids holding a slot (queued or started);
- ``<p>:rl:<queue>:<key>:rate_limited``: zset of the held job ids, scored by when they were held.

A held job's rq status is ``rate_limited``; this project calls it *held* (the API's state, the
panel, ``optima_queue_held_jobs``).

Pause (``rates.pause``, the limits page): rq's promotion knows nothing of it, so a pause moves the key's held
jobs out of rq's held set into the key's rate held set (queues/producer/rates.py), and ``enqueue_into`` holds a
job of a paused key there too (``HOLD_LUA``, run in place of rq's promotion: one script as before). What
still passes a pause: a job of the key coming back through rq's own paths (its scheduler, its registries'
``requeue``) is held in rq's held set and promoted when a slot frees.
"""

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.rate_limit import RateLimitRegistry
from rq.utils import as_text, current_timestamp, now, utcformat

from queues.keyspace import keys as redis_keys
from queues.producer import rates
from queues.producer.limitkeys import MAX_KEY_LENGTH as MAX_KEY_LENGTH
from queues.producer.limitkeys import RESERVED_SUFFIXES as RESERVED_SUFFIXES
from queues.producer.limitkeys import goes_through_limit as goes_through_limit
from queues.producer.limitkeys import is_limited as is_limited
from queues.producer.limitkeys import key_problem as key_problem
from queues.producer.limitkeys import scoped as scoped
from queues.producer.limitkeys import split as split
from queues.producer.rate_script import HOLD_LUA

if TYPE_CHECKING:
    import redis

HELD = JobStatus.RATE_LIMITED.value  # rq's status of a held job: "rate_limited"
HOLDS_SLOT = (JobStatus.QUEUED.value, JobStatus.STARTED.value)


def registry(job):
    return RateLimitRegistry.from_job(job)


# -- re-queue paths rq does not know (queues/failures/retry.py, queues/producer/cancel.py, the abandoned-job scan) ----
def release_into(job, pipeline):
    """Queue on ``pipeline`` (a MULTI) the release of ``job``'s slot and the promotion of the held
    jobs of its key that then fit. For a job leaving the queued/started states in the same MULTI
    (scheduled for a retry)."""
    reg = registry(job)
    pipeline.zrem(reg.allowed_key, job.id)
    reg.acquire_and_enqueue(job.rate_limit_concurrency, pipeline=pipeline)


def enqueue_into(queue, job, pipeline):
    """Queue on ``pipeline`` (a MULTI) the write of ``job`` through its limit: held, or pushed at
    once when its key has a free slot (rq's promotion Lua, run inside the MULTI).

    The steps of rq's ``Queue._enqueue_rate_limited_job``, on rq's public ``RateLimitRegistry``,
    with one difference: rq scores a held job in whole seconds, so jobs held within one second would
    be promoted in the order of their ids; here the score is to the microsecond, so the jobs of a
    key run in the order they came. (Jobs coming back through rq's scheduler or its ``requeue``
    keep rq's whole-second score: in order to the second.) And rq's promotion Lua is run as ``HOLD_LUA``
    (rate_script.py, one script as before), which holds the job in its key's rate held set instead while the
    key is paused (``rates.pause``).

    A job with a rate (``limit_rate``) is held by its rate first (``rates.enqueue_into``)."""

    if rates.of(job) is not None:
        rates.enqueue_into(queue, job, pipeline)
        return
    reg = registry(job)
    job.origin = queue.name
    pipeline.sadd(queue.redis_queues_keys, queue.key)
    reg.register(job.rate_limit_concurrency, pipeline)
    job.set_status(JobStatus.RATE_LIMITED, pipeline=pipeline)
    job.save(pipeline=pipeline)
    queue.connection.register_script(HOLD_LUA)(
        keys=[reg.allowed_key, reg.rate_limited_key, rates.config_key(reg.key), rates.held_key(reg.key)],
        args=[
            job.rate_limit_concurrency,
            current_timestamp(),
            utcformat(now()),
            Queue.redis_queue_namespace_prefix,
            Job.redis_job_namespace_prefix,
            job.id,
            time.time(),
        ],
        client=pipeline,
    )


def requeue_into(queue, job, pipeline):
    """Queue on ``pipeline`` (a MULTI) a re-queue of ``job`` *through its limit*: its slot is freed
    and it is held again behind the jobs of its key already held (or pushed at once when a slot is
    free). A retry with no delay does this, so a failing job cannot keep its key's slot for ever. A job
    with a rate alone has no slot to free: it is held by its rate again, its next start charged too."""
    if is_limited(job):
        pipeline.zrem(registry(job).allowed_key, job.id)
    enqueue_into(queue, job, pipeline)


def put_back_unpushed(connection, allowed_key, held_key):
    """Give back to the held set ``held_key`` the jobs that sit in the slots ``allowed_key`` while
    their hash still says held: rq's promotion Lua took them from the held set and stopped before
    their push (it failed on a key of the wrong type, and a script's writes stay). The Lua marks a
    job queued in the same step as its push, so such a job was never pushed: put back first in line
    (score 0), it is promoted by the next run of the Lua. -> the ids put back."""
    put_back = []
    for raw in connection.zrange(allowed_key, 0, -1):
        job_id = as_text(raw)
        status = connection.hget(f"{Job.redis_job_namespace_prefix}{job_id}", "status")
        if as_text(status or b"") == HELD:
            with connection.pipeline() as pipe:
                pipe.zrem(allowed_key, raw)
                pipe.zadd(held_key, {raw: 0})
                pipe.execute()
            put_back.append(job_id)
    return put_back


def release(job):
    """Free ``job``'s slot and promote the next held jobs of its key, unless Redis says the job is
    queued or started (it still needs the slot). For a job that ended outside rq's worker (the
    abandoned-job scan's dead letter, a cancel, the gate's refusal). Returns the promoted job ids.

    Never raises for what is in Redis: a key of the limit of another type than rq's (WRONGTYPE) is
    renamed aside (``queues.keyspace.quarantine``), and a limit that still cannot be read (a concurrency that
    is no number) is reported once and skipped, its slot left to rq's maintenance."""
    if not is_limited(job):
        return []

    def release_now():
        status = as_text(job.connection.hget(job.key, "status") or b"")
        if status in HOLDS_SLOT:
            return []
        return registry(job).release_and_enqueue(job.id)

    from queues.keyspace import quarantine  # no cycle: to the top once issue 32's edits here are merged

    return (
        quarantine.contain(
            job.connection,
            lambda: quarantine.limit(job.rate_limit_key),
            release_now,
            who=f"Limit key {job.rate_limit_key}",
            what="release a job's slot",
        )
        or []
    )


# -- reading (panel, API, metrics): no writes ------------------------------------------------------
@dataclass(frozen=True)
class Hold:
    """Where a job stands with its limit key: its concurrency, its rate, or both."""

    key: str  # the limit key as given at enqueue (not scoped)
    concurrency: int | None  # jobs of the key that may be queued or running at once; None for a rate alone
    in_use: int | None  # slots taken now (queued or running jobs of the key); None for a rate alone (not tracked)
    held: int  # jobs of the key held now (by the concurrency, the rate or a pause)
    ahead: int | None  # held jobs of the key before this one; None when this one is not held
    rate: str | None = None  # the job's rate, e.g. "5/s" (rates.Rate); None without one
    next_release: float | None = None  # seconds until the key's next token, while jobs wait for one; else None
    paused: bool = False  # the key is paused (the limits page): its held jobs wait until it is resumed

    def as_dict(self) -> dict[str, int | float | str | bool | None]:
        return {
            "key": self.key,
            "concurrency": self.concurrency,
            "in_use": self.in_use,
            "held": self.held,
            "ahead": self.ahead,
            "rate": self.rate,
            "next_release": self.next_release,
            "paused": self.paused,
        }


def hold_key(job: Any) -> str | None:
    """The scoped limit key of a job with a concurrency or a rate, or None."""
    if is_limited(job):
        return str(job.rate_limit_key)
    rate = rates.of(job)
    return rate[0] if rate is not None else None


HOLD_READS = 7  # commands ``read_hold`` queues


def read_hold(pipe: Any, job: Any) -> bool:
    """Queue on ``pipe`` (not a MULTI) the ``HOLD_READS`` reads of ``job``'s hold, for ``hold_from``; False (nothing
    queued) for a job without a limit key. The job page reads them in its own pipeline (queues/board/job.py)."""
    scoped_key = hold_key(job)
    if scoped_key is None:
        return False
    pipe.zcard(redis_keys.limit_allowed_key(scoped_key))
    pipe.zcard(redis_keys.limit_held_key(scoped_key))
    pipe.zrank(redis_keys.limit_held_key(scoped_key), job.id)
    # held by its rate, or by a pause of its key (rates.pause), even without a rate
    pipe.zcard(rates.held_key(scoped_key))
    pipe.zrank(rates.held_key(scoped_key), job.id)
    pipe.hget(rates.config_key(scoped_key), "paused")
    pipe.zscore(rates.due_key(), scoped_key)
    return True


def hold_from(job: Any, replies: list[Any], now: float | None = None) -> Hold:
    """The ``Hold`` of ``job`` from the ``HOLD_READS`` replies of ``read_hold`` (a key of the wrong type, planted,
    reads as empty: a page never fails on it). A job waiting in its rate held set (a rate, or a paused key) is
    behind the jobs its concurrency holds: both count as held, and those count as ahead of it."""
    in_use, held, rank, rate_held, rate_rank, paused, due = [None if isinstance(r, Exception) else r for r in replies]
    if rank is None and rate_rank is not None:
        rank = int(held or 0) + int(rate_rank)
    limited, rate = is_limited(job), rates.of(job)
    paused = as_text(paused or b"") == "1"
    try:
        wait = None if due is None or paused else max(0.0, round(float(due) - (now or time.time()), 3))
    except ValueError:
        wait = None
    return Hold(
        key=split(hold_key(job) or "")[1],
        concurrency=int(job.rate_limit_concurrency) if limited else None,
        in_use=int(in_use or 0) if limited else None,
        held=int(held or 0) + int(rate_held or 0),
        ahead=None if rank is None else int(rank),
        rate=str(rate[1]) if rate is not None else None,
        next_release=wait,
        paused=paused,
    )


# ``job``: an rq Job (Any: its limit fields are Optional to mypy until ``is_limited`` says they are set).
def hold_of(job: Any, connection: "redis.Redis | None" = None) -> Hold | None:
    """The ``Hold`` of a job with a limit key, a concurrency or a rate (one pipelined round trip), or None
    without one."""
    connection = connection or getattr(job, "connection", None)
    if hold_key(job) is None or connection is None:
        return None
    with connection.pipeline(transaction=False) as pipe:
        read_hold(pipe, job)
        replies = pipe.execute(raise_on_error=False)
    return hold_from(job, replies)


@dataclass(frozen=True)
class KeyUse:
    """One limit key of a queue, as the panel shows it."""

    key: str  # not scoped
    concurrency: int
    in_use: int
    held: int


def keys_in_use(connection, queue_names, per_queue=10):
    """{queue: [KeyUse, ...]} of the limit keys in use on ``queue_names``, most held first (at most
    ``per_queue`` each), in two pipelined round trips; the panel's "held jobs". Held: by the concurrency
    and by the rate (queues/producer/rates.py). Reads only."""
    wanted = set(queue_names)
    with connection.pipeline(transaction=False) as pipe:
        pipe.smembers(redis_keys.limit_keys_key())
        pipe.zrange(rates.keys_key(), 0, -1)
        sets = pipe.execute(raise_on_error=False)
    if isinstance(sets[0], Exception):
        raise sets[0]  # rq's set of the wrong type: the caller reports it (board/views.py)
    members = {as_text(m) for m in sets[0]}
    if not isinstance(sets[1], Exception):
        members |= {as_text(m) for m in sets[1]}
    members = sorted(m for m in members if split(m)[0] in wanted and split(m)[1])
    if not members:
        return {}
    with connection.pipeline(transaction=False) as pipe:
        for member in members:
            pipe.hget(redis_keys.limit_config_key(member), "concurrency")
            pipe.zcard(redis_keys.limit_allowed_key(member))
            pipe.zcard(redis_keys.limit_held_key(member))
            pipe.zcard(rates.held_key(member))
            pipe.hget(rates.config_key(member), "concurrency")  # a paused key's, once rq dropped its own hash
        replies = pipe.execute(raise_on_error=False)
    found = {}
    for i, member in enumerate(members):
        concurrency, in_use, held, rate_held, kept = replies[5 * i : 5 * i + 5]
        if any(isinstance(r, Exception) for r in (concurrency, in_use, held, rate_held)):
            continue  # a key of the wrong type (planted): left out, never a 500
        concurrency = concurrency or (None if isinstance(kept, Exception) else kept)
        if not (concurrency or in_use or held or rate_held):
            continue  # a rate key with nothing held
        queue_name, limit_key = split(member)
        try:
            concurrency = int(as_text(concurrency)) if concurrency else 0
        except ValueError:
            concurrency = 0
        found.setdefault(queue_name, []).append(KeyUse(limit_key, concurrency, int(in_use), int(held) + int(rate_held)))
    return {name: sorted(uses, key=lambda u: (-u.held, u.key))[:per_queue] for name, uses in found.items()}
