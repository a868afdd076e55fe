"""The poison harness's planters of the other key families: worker sets and hashes, RQ's scheduler lock,
rq-scheduler's set and hash, schedule templates and last runs, the pause sets, limit and unique keys,
history samples, counters and the workers' own locks (``poison_matrix`` has the table)."""

import time

from django.urls import reverse
from rq.job import JobStatus
from rq.scheduler import RQScheduler
from rq.worker import Worker
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues.keyspace import keys
from queues.metrics import store
from queues.periodic.plan import scheduled_jobs_key
from tests.support.poison_matrix import BAD, BIG, DEFAULT_INDEX, FORGED, GOOD, Planted, job, planter, trap_job

# --- worker sets and hashes ------------------------------------------------------------------------------


@planter("worker set", "non_utf8")
def _(ctx, mark):
    member = Worker.redis_worker_namespace_prefix.encode() + mark.encode() + b"-\xff"
    ctx.connection.sadd(Worker.redis_workers_keys, member)
    ctx.connection.sadd(WORKERS_BY_QUEUE_KEY % GOOD, member)
    return Planted()


@planter("worker set of a queue", "wrong_type")
def _(ctx, mark):
    """(The set of all workers holds the bad members here; tests/queues/trust/test_trust_worker.py turns it
    into a string.)"""
    key = WORKERS_BY_QUEUE_KEY % BAD
    ctx.connection.set(key, f"{mark}: a string, not a set")
    return Planted(marks=[key], aside=key)


def _worker(kind, fields, name=None):
    @planter("worker hash", kind)
    def plant(ctx, mark):
        key = f"{Worker.redis_worker_namespace_prefix}{name(mark) if name else mark + '-worker'}"
        base = {
            "birth": "2026-01-01T00:00:00Z",
            "last_heartbeat": "2026-01-01T00:00:00Z",
            "queues": GOOD,
            "state": "idle",
        }
        if fields is None:
            ctx.connection.set(key, f"{mark}: a string, not a hash")
        else:
            ctx.connection.hset(key, mapping={**base, **fields(mark)})
        ctx.connection.sadd(Worker.redis_workers_keys, key)
        ctx.connection.sadd(WORKERS_BY_QUEUE_KEY % GOOD, key)
        return Planted(aside=key, allowed=listed(mark))

    return plant


def listed(mark):
    """A worker rq can read (any text is a name, escaped where shown; rq 3 ignores ``current_job``): the
    panel lists it, as it would any worker a writer registers."""

    def check(connection, answers):
        page = answers.get(("GET", reverse("django_rq:workers", args=[DEFAULT_INDEX])))
        return "" if page is not None and mark in page.content.decode() else f"{mark} is not on the workers page"

    return check


_worker("wrong_type", None)
_worker("non_utf8", lambda mark: {"queues": b"def\xffault", "state": b"\xfe"})
_worker("overflow", lambda mark: {"birth": "99999-01-01T00:00:00Z", "total_working_time": "1e999"})
_worker("nan", lambda mark: {"last_heartbeat": "nan", "successful_job_count": "nan"})
_worker("rejected_id", lambda mark: {"current_job": f"../../{mark}"})
_worker("newline_id", lambda mark: {}, name=lambda mark: f"{mark}\n{FORGED}")
_worker("large", lambda mark: {"queues": ",".join(["default"] * (BIG // 8))})


# --- RQ's scheduler (in the worker) and rq-scheduler's keys --------------------------------------------


@planter("RQ scheduler lock", "planted_lock")
def _(ctx, mark):
    """A lock held by no scheduler: the repricer's due jobs wait (pausing scheduling stays possible)."""
    lock = RQScheduler.get_locking_key("repricer")
    ctx.connection.set(lock, f"{mark}-planted-scheduler")
    due = job(ctx, f"{mark}-due", queue="repricer", status=JobStatus.SCHEDULED)
    ctx.connection.zadd(keys.scheduled_key("repricer"), {due: 0})

    def check(connection, answers):
        held = connection.get(lock)
        waits = connection.zscore(keys.scheduled_key("repricer"), due) is not None
        return "" if held is not None and waits else f"lock {held!r}, the due job still scheduled: {waits}"

    return Planted(job_ids=[due], allowed=check)


def _rq_scheduler(kind, value, score):
    @planter("rq-scheduler set", kind)
    def plant(ctx, mark):
        member = value(ctx, mark)
        ctx.connection.zadd(scheduled_jobs_key(), {member: score})
        return Planted()

    return plant


_rq_scheduler("non_utf8", lambda ctx, mark: mark.encode() + b"-\xff", 0)
_rq_scheduler("rejected_id", lambda ctx, mark: job(ctx, f"{mark}-x", raw_id=f"{mark}.dot.id"), 0)
_rq_scheduler("undeclared_trap", lambda ctx, mark: trap_job(ctx, mark, queue="lifecycle"), 0)
_rq_scheduler("negative_score", lambda ctx, mark: trap_job(ctx, mark, queue="lifecycle"), -1)
_rq_scheduler("absurd_score", lambda ctx, mark: trap_job(ctx, mark, queue="lifecycle"), float("inf"))
_rq_scheduler("large", lambda ctx, mark: mark + "x" * BIG, 0)


@planter("rq-scheduler hash", "wrong_type")
def _(ctx, mark):
    from queues.periodic.scheduler import PrefixedScheduler

    ctx.connection.set(PrefixedScheduler.scheduler_key, f"{mark}: a string, not a hash")
    return Planted(marks=[PrefixedScheduler.scheduler_key], aside=PrefixedScheduler.scheduler_key)


@planter("schedule template", "bad_zlib")
def _(ctx, mark):
    """The template of the declared schedule ``tick`` (tests/support/lifecycle_settings.py), its data garbage."""
    key = keys.job_key("schedule-tick")
    ctx.connection.hset(
        key,
        mapping={
            "data": b"\x00" + mark.encode(),
            "origin": "lifecycle",
            "status": "scheduled",
            "created_at": "2026-01-01T00:00:00Z",
            "meta": "{}",
        },
    )
    ctx.connection.zadd(scheduled_jobs_key(), {"schedule-tick": 0})

    def check(connection, answers):
        data = connection.hget(key, "data")
        return "" if data and not data.startswith(b"\x00") else "the template was not written again"

    return Planted(marks=["schedule-tick"], job_ids=["schedule-tick"], allowed=check)


@planter("schedule template", "wrong_type")
def _(ctx, mark):
    key = keys.job_key("schedule-nightly")
    ctx.connection.set(key, f"{mark}: a string, not a hash")
    return Planted(marks=["schedule-nightly"], aside=key)


@planter("schedule last run", "rejected_id")
def _(ctx, mark):
    ctx.connection.set(keys.schedule_last_key("tick"), job(ctx, f"{mark}-x", queue="lifecycle", raw_id=f"../../{mark}"))
    return Planted()


@planter("schedule last run", "wrong_type")
def _(ctx, mark):
    key = keys.schedule_last_key("nightly")
    ctx.connection.hset(key, mark, "a hash, not a job id")
    return Planted(marks=[key], aside=key)


@planter("schedules' pause set", "non_utf8")
def _(ctx, mark):
    ctx.connection.sadd(keys.schedules_paused_key(), mark.encode() + b"-\xff")
    return Planted()


# --- limit keys, unique keys ---------------------------------------------------------------------------


@planter("limit key set", "wrong_type")
def _(ctx, mark):
    ctx.connection.set(keys.limit_keys_key(), f"{mark}: a string, not a set")
    return Planted(marks=[keys.limit_keys_key()], aside=keys.limit_keys_key())


def _unique(kind, cabinet, plant_value):
    @planter("unique key", kind)
    def plant(ctx, mark):
        """The key ``POST /features/orders/sync/`` of cabinet ``cabinet`` asks first (finding 3)."""
        key = keys.unique_key("orders-sync", f"owner-{ctx.owner}.cabinet-{cabinet}")
        plant_value(ctx.connection, key, mark)

        def check(connection, answers):  # an id rq accepts, of no job: replaced, as a key whose job is gone is
            held = connection.get(key) if connection.type(key) == b"string" else None
            return "" if held is not None and len(held) < 100 else "not replaced by the API's job"

        return Planted(marks=[key], allowed=check)

    return plant


_unique("rejected_id", 901, lambda c, key, mark: c.set(key, f"{mark}.b/c"))
_unique("non_utf8", 902, lambda c, key, mark: c.set(key, mark.encode() + b"\xff\xfe"))
_unique("newline_id", 903, lambda c, key, mark: c.set(key, f"{mark}\n{FORGED}"))
_unique("wrong_type", 904, lambda c, key, mark: c.hset(key, mark, "a hash, not a job id"))
_unique("large", 905, lambda c, key, mark: c.set(key, mark + "x" * BIG))


# --- history samples, the pause set, counters ----------------------------------------------------------


def _history(kind, entry):
    @planter("history sample", kind)
    def plant(ctx, mark):
        ctx.connection.lpush(keys.history_key(), entry(mark, time.time() - 30))
        return Planted()

    return plant


_history("overflow", lambda mark, at: f'{{"m": "{mark}", "t": {at!r}, "q": {{"default": [{10**400}, 1]}}}}')
_history("nan", lambda mark, at: f'{{"m": "{mark}", "t": NaN, "q": {{"default": [1, 1]}}}}')
_history("bad_json", lambda mark, at: f'{{"m": "{mark}", not json')
_history("non_utf8", lambda mark, at: b'{"m": "' + mark.encode() + b'\xff", "t": 1, "q": {}}')
_history("large", lambda mark, at: f'{{"m": "{mark}", "t": {at!r}, "q": {{"default": [1, 1]}}, "x": "{"h" * BIG}"}}')


@planter("pause set", "wrong_type")
def _(ctx, mark):
    ctx.connection.set(keys.paused_key(), f"{mark}: a string, not a set")
    return Planted(marks=[keys.paused_key()], aside=keys.paused_key())


@planter("counters", "overflow")
def _(ctx, mark):
    ctx.connection.hset(store.counters_key(GOOD), mapping={"processed": "1e999", mark: "x"})
    return Planted(marks=[store.counters_key(GOOD)])


@planter("counters", "nan")
def _(ctx, mark):
    ctx.connection.hset(store.counters_key("repricer"), mapping={"failed": "nan", mark: "x"})
    return Planted(marks=[store.counters_key("repricer")])


@planter("counters", "wrong_type")
def _(ctx, mark):
    ctx.connection.set(store.counters_key(BAD), f"{mark}: a string, not a hash")
    return Planted(marks=[store.counters_key(BAD)], aside=store.counters_key(BAD))


@planter("durations", "nan")
def _(ctx, mark):
    ctx.connection.rpush(store.durations_key(GOOD), "nan", f"{mark}-not-a-number", "1e999")
    return Planted()


# --- the workers' own bookkeeping --------------------------------------------------------------------------


@planter("reconcile mark", "nan")
def _(ctx, mark):
    """The workers' reconcile takes this key ``SET NX``: whatever it holds, they wait (a planted lock;
    ``manage.py queues_reconcile`` does not)."""
    key = keys.reconcile_key()
    ctx.connection.set(key, "nan")
    return Planted(
        marks=[key],
        allowed=lambda connection, answers: "" if connection.get(key) == b"nan" else "the planted lock is gone",
    )


@planter("intermediate seen", "wrong_type")
def _(ctx, mark):
    key = keys.intermediate_seen_key(GOOD)
    ctx.connection.set(key, f"{mark}: a string, not a hash")
    return Planted(marks=[key], aside=key)


@planter("history lock", "wrong_type")
def _(ctx, mark):
    """Any key there holds the lock (``SET NX``): the history is not sampled while it stays."""
    key = keys.history_lock_key()
    ctx.connection.hset(key, mark, "a hash, not a lock")
    return Planted(
        marks=[key],
        aside=key,
        allowed=lambda connection, answers: (
            "" if connection.hget(key, mark) is not None else "the planted lock is gone"
        ),
    )


# --- priority bands (queues.keyspace.keys.band_key): read and popped as the queue list is ---------------


@planter("high band", "wrong_type")
def _(ctx, mark):
    key = keys.band_key(keys.queue_key(BAD), "high")
    ctx.connection.hset(key, mark, "a hash, not a list")
    return Planted(marks=[key], aside=key)
