"""Rate limits per key: a limit key's jobs start no faster than N per period (issue 35, §2).

``queues.enqueue(..., limit_key="seller:42", limit_rate="10/s")``, alone or with ``limit_concurrency``
(queues/producer/limits.py). The rate is ``limits``' syntax, "N/second|minute|hour" ("10 per second",
"2/3 seconds") or short "N/s", "N/m", "N/h".

Where the rate is charged: when a job *leaves the held set for its queue* (its release). A job of a
rate key is always written held (rq's status ``rate_limited``, the project's *held*: no attempt
spent, never failed) into ``<p>:optima:rate:<q>:<key>:held``, and one Lua script (``RELEASE_LUA``)
moves the oldest held jobs onto the queue while the key has budget. Charging at the enqueue would let
a backlog pile up in the queue and start in a burst; charging in the worker's pop would put a job back
held after a worker took it (a write on the hot path, and a release time that depends on how fast
workers are). Charged at the release, a worker takes the job as soon as it is free, a job with a rate
costs the worker nothing (no command on its success write), and the release times come from Redis'
clock alone. The one difference with a start: when every worker is busy, released jobs wait in the
queue and may start closer together than the rate (never more of them than were released).

The budget is GCRA (a "theoretical arrival time" ``tat`` per key): one job every period/N, with a
tolerance of one such step (none for N = 1) — so at most 2 jobs of a key are released at once, and at
most N + 1 in any period — and a release up to one step late loses nothing (the schedule does not
drift). A release that finds no budget knows when the next one comes: it scores the key by that time in
``<p>:optima:rate-due``; the RQ scheduler's loop (which already wakes every second,
queues/periodic/supervision.py) calls ``wait`` instead of sleeping, which runs ``RELEASE_LUA`` on the due
keys (one ZRANGEBYSCORE for all keys) and sleeps until the next due time — a timer, never a loop
polling Redis. Every worker also releases the due keys every 2 s (queues/worker/housekeeping.py), the
backstop while no scheduler runs.

With ``limit_concurrency`` too, the rate comes first: a job released by its rate is handed to rq's
concurrency stage (rq's ``:rate_limited`` zset of the same scoped key, then rq's promotion, inline in
the same script), so both bound it.

Paused key (``pause``/``resume``, the panel's limits page through ``queues.operator``), with a rate or a
concurrency only: its held jobs stay held, its queue's other jobs run; a resume releases what the budget allows
at once. The jobs rq's concurrency holds are moved into the rate held set at the pause (rq's promotion, run by
rq's worker when a slot frees, never looks there) and a concurrency-only job enqueued while paused is held there
too (``limits.enqueue_into``); for a key without a rate the resume moves them back to rq's held set and promotes
them (rate_script.py).

Keys (``<p>`` = QUEUE_PREFIX; ``<q>:<key>`` scoped as ``limits.scoped``):

- ``<p>:optima:rate-keys``: zset of the scoped keys with a rate, scored by their last enqueue (+inf while
  paused), forgotten a day after;
- ``<p>:optima:rate:<q>:<key>``: hash, ``count``, ``seconds`` (the latest enqueue's), ``tat``,
  ``paused`` ("1"), ``concurrency`` (when the jobs have one, or kept by a pause); expires a day after the key
  went idle;
- ``<p>:optima:rate:<q>:<key>:held``: zset of the held job ids, scored by when they were held;
- ``<p>:optima:rate-due``: zset of the scoped keys with held jobs and no budget, scored by when the
  next token comes.

Every way a job comes back is charged too, since each start is: a job with a rate is written held when it
is enqueued to run now; a delayed one (``delay``/``at``), a debounced one (queues/producer/dedupe.py) and a
retry after its backoff are scheduled as any job and moved into their rate's hold by the RQ scheduler when
due (``move_own_due_jobs`` in queues/periodic/supervision.py: rq's own move would push them onto the
queue); a retry with no delay goes back through ``limits.requeue_into``, and a requeue of a failed or
finished job (the panel, a dead letter's retry, "Requeue All": queues/failures/operations.py,
queues/operator/) through ``limits.enqueue_into``.

Left out: a throttled job with a rate that starts now (refused, queues/producer/dedupe.py), and a rate
with ``priority`` (refused: the release pushes onto the normal band).
"""

import logging
import re
import time
from dataclasses import dataclass

import redis
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.rate_limit import RateLimitRegistry
from rq.utils import as_text, now, utcformat

from queues import conf
from queues.connection.outage import sleep
from queues.exceptions import InvalidJob
from queues.keyspace import keys

# The names of a limit key (scoped, key_problem, is_limited), shared with limits.py, which imports this module.
from queues.producer import limitkeys
from queues.producer.rate_script import PAUSE_LUA, RELEASE_LUA

logger = logging.getLogger("queues.resilience")

META = "limit_rate"  # job.meta: {"key": scoped key, "count": N, "seconds": period}
SHORT_UNITS = {"s": "second", "sec": "second", "m": "minute", "min": "minute", "h": "hour", "hr": "hour"}
UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600}
IDLE_TTL_SECONDS = 24 * 3600  # an idle key's hash outlives its last release by a day


@dataclass(frozen=True)
class Rate:
    count: int  # jobs ...
    seconds: float  # ... per this many seconds

    def __str__(self):
        unit = {1: "s", 60: "min", 3600: "h"}.get(int(self.seconds)) if self.seconds == int(self.seconds) else None
        return f"{self.count}/{unit}" if unit else f"{self.count}/{self.seconds:g}s"


def parse(text):
    """``Rate`` of ``text`` ("10/s", "10/second", "5 per minute", "2/3 seconds"); ValueError saying why not."""
    if not isinstance(text, str):
        raise ValueError(f"must be a string such as '10/s', not {type(text).__name__}")
    match = re.fullmatch(r"\s*(\d+)\s*(?:/|per)\s*(\d+)?\s*([a-z]+)\s*", text.lower())
    if not match:
        raise ValueError("must read 'N/second', 'N/minute' or 'N/hour' (or 'N/s', 'N/min', 'N/h')")
    count, multiple, unit = int(match[1]), int(match[2] or 1), match[3]
    unit = SHORT_UNITS.get(unit, unit.rstrip("s") if unit.endswith("s") and unit[:-1] in UNIT_SECONDS else unit)
    if unit not in UNIT_SECONDS:
        raise ValueError(f"has the unknown period {match[3]!r}: use second, minute or hour")
    if count < 1 or multiple < 1:
        raise ValueError("must allow at least 1 job per period of at least 1 unit")
    return Rate(count, float(multiple * UNIT_SECONDS[unit]))


def checked(limit_key, limit_rate, *, priority):
    """The ``Rate`` of an enqueue's ``limit_rate`` (None without one); ``InvalidJob`` saying how to fix it.
    A ``delay``/``at`` is no concern here: the job is scheduled as any delayed job and held by its rate when
    due (the RQ scheduler's move, queues/periodic/supervision.py)."""
    if limit_rate is None:
        return None
    if limit_key is None:
        raise InvalidJob(
            f"limit_rate={limit_rate!r} without a limit_key: the rate limits the jobs sharing a key. "
            "Pass limit_key='<key>' too (e.g. limit_key='seller:42'), or drop limit_rate."
        )
    problem = limitkeys.key_problem(limit_key)
    if problem:
        raise InvalidJob(f"limit_key={limit_key!r} {problem}. Pass e.g. limit_key='seller:42'.")
    try:
        rate = parse(limit_rate)
    except ValueError as exc:
        raise InvalidJob(f"limit_rate={limit_rate!r} {exc}. Pass e.g. limit_rate='10/s'.") from None
    if priority:
        raise InvalidJob(
            f"priority={priority!r} with limit_rate: a held job is pushed to the normal band when its turn "
            "comes, so the two cannot be combined. Drop priority, or limit_rate."
        )
    return rate


def apply(job, limit_key, rate):
    """Record ``rate`` on ``job`` (built, not yet signed): ``job.meta[META]``."""
    if rate is not None:
        job.meta[META] = {"key": limitkeys.scoped(job.origin, limit_key), "count": rate.count, "seconds": rate.seconds}


def of(job):
    """(scoped key, Rate) of a job with a rate, else None."""
    found = (getattr(job, "meta", None) or {}).get(META)
    if not isinstance(found, dict):
        return None
    try:
        return str(found["key"]), Rate(int(found["count"]), float(found["seconds"]))
    except (KeyError, TypeError, ValueError):
        return None


# -- keys -------------------------------------------------------------------------------------------
def keys_key():
    """Zset of the scoped keys with a rate, scored by their last enqueue (+inf while paused); a key idle for
    ``IDLE_TTL_SECONDS`` is forgotten by the scheduler's release."""
    return conf.app_key("rate-keys")


def due_key():
    return conf.app_key("rate-due")


def config_key(scoped_key):
    return conf.app_key("rate", scoped_key)


def held_key(scoped_key):
    return conf.app_key("rate", scoped_key, "held")


# -- the release --------------------------------------------------------------------------------------
def _script(connection):
    return connection.register_script(RELEASE_LUA)


def _args(mode, scoped_key=""):
    return [
        conf.app_key("rate", ""),
        due_key(),
        Queue.redis_queue_namespace_prefix,
        Job.redis_job_namespace_prefix,
        keys.limit_config_key(""),
        keys.limit_keys_key(),
        utcformat(now()),
        mode,
        scoped_key,
        IDLE_TTL_SECONDS,
        keys_key(),
    ]


def enqueue_into(queue, job, pipeline):
    """Queue on ``pipeline`` (a MULTI) the write of ``job`` held by its rate, and the release of its key
    (the job goes onto its queue at once when the key has budget)."""
    scoped_key, rate = of(job)
    job.origin = queue.name
    pipeline.sadd(queue.redis_queues_keys, queue.key)
    pipeline.zadd(keys_key(), {scoped_key: time.time()}, gt=True)  # a paused key keeps its +inf
    config = {"count": rate.count, "seconds": repr(rate.seconds)}
    if limitkeys.is_limited(job):
        config["concurrency"] = job.rate_limit_concurrency
        RateLimitRegistry.from_job(job).register(job.rate_limit_concurrency, pipeline)
    pipeline.hset(config_key(scoped_key), mapping=config)
    job.set_status(JobStatus.RATE_LIMITED, pipeline=pipeline)
    job.save(pipeline=pipeline)
    pipeline.zadd(held_key(scoped_key), {job.id: time.time()})
    _script(queue.connection)(keys=[], args=_args("key", scoped_key), client=pipeline)


def release(connection, scoped_key):
    """Release what the budget of ``scoped_key`` allows now -> the released job ids."""
    return [as_text(i) for i in _script(connection)(keys=[], args=_args("key", scoped_key))]


def release_due(connection):
    """Release every key whose next token has come (one script) -> seconds until the next due key, or None."""
    reply = _script(connection)(keys=[], args=_args("due"))
    nxt = as_text(reply[0]) if reply else ""
    return float(nxt) if nxt else None


def wait(connection, seconds, should_stop):
    """Wait ``seconds`` (the RQ scheduler's interval), releasing the rate keys as their tokens come: the
    scheduler's loop calls this instead of sleeping. Between releases it sleeps until the next due time
    (or the end of the interval): a timer, never a poll. A key that becomes due while it sleeps (a new
    hold) is seen at the next wake, within the interval; the budget's one step of tolerance absorbs most
    of that delay. (A BLPOP on a wake-up list was tried: its replies sometimes came only at the client's
    socket timeout, 12 s, under load.) A Redis error ends this wait's releases with a plain sleep, logged."""

    deadline = time.monotonic() + seconds
    while not should_stop():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            nxt = release_due(connection)
        except redis.RedisError as exc:
            _report(exc)
            sleep(max(0.0, deadline - time.monotonic()), should_stop)
            return
        sleep(left if nxt is None else max(min(left, nxt), 0.001), should_stop, step=0.05)


_reported = {"at": 0.0}


def _report(exc):
    """A failed release of the due keys, logged at most once a minute (Redis away says so once per outage)."""
    if time.monotonic() - _reported["at"] >= 60:
        _reported["at"] = time.monotonic()
        logger.warning("releasing the rate-limited jobs that are due failed: %s: %s", type(exc).__name__, exc)


# -- pause (the operator's actions) -------------------------------------------------------------------------
def pause(connection, queue_name, limit_key):
    """Hold ``limit_key``'s jobs on ``queue_name`` until ``resume``, for a key with a rate or a concurrency only
    (its jobs already queued or running still run) -> how many of the jobs held by its concurrency it moved to the
    key's rate held set (``PAUSE_LUA``: there, no promotion of rq's takes them when a slot frees)."""
    scoped_key = limitkeys.scoped(queue_name, limit_key)
    script = connection.register_script(PAUSE_LUA)
    return int(
        script(
            keys=[
                config_key(scoped_key),
                held_key(scoped_key),
                keys.limit_held_key(scoped_key),
                keys.limit_config_key(scoped_key),
                keys_key(),
                due_key(),
            ],
            args=[scoped_key],
        )
    )


def resume(connection, queue_name, limit_key):
    """Release ``limit_key``'s held jobs again -> the ids released at once: as its budget allows for a key with a
    rate, all that its concurrency allows (back in rq's held set, promoted) for a key without one."""
    scoped_key = limitkeys.scoped(queue_name, limit_key)
    with connection.pipeline() as pipe:
        pipe.hdel(config_key(scoped_key), "paused")
        pipe.zadd(keys_key(), {scoped_key: time.time()})
        pipe.execute()
    return release(connection, scoped_key)


def is_paused(connection, queue_name, limit_key):
    return as_text(connection.hget(config_key(limitkeys.scoped(queue_name, limit_key)), "paused") or b"") == "1"
