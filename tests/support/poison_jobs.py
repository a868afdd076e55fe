"""The poison harness's planters of the job families: queue lists, job hashes field by field (signed
jobs of ``sample.add(2, 3)`` with one field changed), the six registries, executions and results
streams (``poison_matrix`` has the table and what each planter returns)."""

import base64
import json
import os
import time
import zlib

from rq.job import JobStatus

from queues.keyspace import keys
from tests.support.poison_matrix import (
    BAD,
    BIG,
    FORGED,
    GOOD,
    Planted,
    job,
    job_page,
    member,
    planter,
    queued,
    registry_key,
    trap_job,
)

# --- queue lists ------------------------------------------------------------------------------------


@planter("queue list", "wrong_type")
def _(ctx, mark):
    ctx.connection.hset(keys.queue_key(BAD), mark, "a hash, not a list")
    return Planted(marks=[keys.queue_key(BAD)], aside=keys.queue_key(BAD))


@planter("queue list", "non_utf8")
def _(ctx, mark):
    return Planted(job_ids=[queued(ctx, job(ctx, f"{mark}-x", raw_id=mark.encode() + b"-\xff\xfe"))])


@planter("queue list", "rejected_id")
def _(ctx, mark):
    return Planted(job_ids=[queued(ctx, job(ctx, f"{mark}-x", raw_id=f"{mark}.dot.id"))])


@planter("queue list", "colon_id")
def _(ctx, mark):
    return Planted(job_ids=[queued(ctx, job(ctx, f"{mark}-x", raw_id=f"{mark}:colon"))])


@planter("queue list", "slash_id")
def _(ctx, mark):
    return Planted(job_ids=[queued(ctx, job(ctx, f"{mark}-x", raw_id=f"../../{mark}/x"))])


@planter("queue list", "newline_id")
def _(ctx, mark):
    return Planted(job_ids=[queued(ctx, job(ctx, f"{mark}-x", raw_id=f"{mark}\n{FORGED}"))])


@planter("queue list", "large")
def _(ctx, mark):
    return Planted(job_ids=[queued(ctx, job(ctx, f"{mark}-x", raw_id=mark + "x" * BIG))])


@planter("intermediate list", "wrong_type")
def _(ctx, mark):
    key = keys.intermediate_key(keys.queue_key(GOOD))
    ctx.connection.set(key, f"{mark}: a string, not a list")
    return Planted(marks=[key], aside=key)


@planter("intermediate list", "non_utf8")
def _(ctx, mark):
    """Popped and never started: the abandoned-job scan, which first saw it long ago, takes it."""
    raw_id = mark.encode() + b"-\xff"
    ctx.connection.rpush(keys.intermediate_key(keys.queue_key("repricer")), raw_id)
    ctx.connection.hset(keys.intermediate_seen_key("repricer"), raw_id, time.time() - 3600)
    return Planted()


# --- job hashes, field by field (signed jobs of sample.add(2, 3), one field changed, queued) ----------


def ran(job_id):
    """What runs is what the signature covers (function, arguments, callbacks); the rest of a signed
    job's hash is the writer's to change, as replaying the job is: the job ran as signed."""

    def check(connection, answers):
        status = connection.hget(keys.job_key(job_id), "status")
        return "" if status == b"finished" else f"{job_id} is {status!r}, not finished"

    return check


def shown(job_id):
    """A value rq reads as it is (a large result is shown cut: the page budget holds)."""

    def check(connection, answers):
        page = job_page(answers, job_id)
        return "" if page is not None and page.status_code == 200 else f"the page of {job_id}: {page}"

    return check


def _field(name, kind, value, *, signed=True, where="queued", harmless=False):
    @planter(f"job hash: {name}", kind)
    def plant(ctx, mark):
        fields = {name: value(mark) if callable(value) else value}
        if where == "queued":
            job_id = queued(ctx, job(ctx, f"{mark}-job", fields=fields, signed=signed))
        else:
            job_id = job(ctx, f"{mark}-job", fields=fields, signed=signed, status=JobStatus.FAILED)
            ctx.connection.zadd(keys.failed_key(GOOD), {job_id: "+inf"})
        return Planted(job_ids=[job_id], allowed=ran(job_id) if harmless else None)

    return plant


_field("data", "bad_zlib", b"\x00\x01 not zlib", signed=False)
_field("data", "bad_json", zlib.compress(b"not json {"), signed=False)
_field("data", "non_utf8", zlib.compress(b'["\xff\xfe", [], {}]'), signed=False)
_field("data", "large", lambda mark: os.urandom(BIG), signed=False)
_field("data", "missing", b"", signed=False, where="failed")
_field("meta", "bad_json", b"{not json")
_field("meta", "non_utf8", b'{"queue": "\xff\xfe"}')
_field("meta", "nan", '{"queue": "default", "attempt": NaN, "attempts_allowed": 1, "progress": [NaN]}', harmless=True)
_field("meta", "overflow", '{"queue": "default", "attempt": 1e999, "attempts_allowed": %s}' % (10**400), harmless=True)
_field("meta", "large", lambda mark: json.dumps({"queue": "default", "x": "m" * BIG}))
_field("signature", "non_utf8", b"\xff" * 64)
_field("signature", "non_ascii", "é" * 32)
_field("signature", "large", "a" * BIG)
_field("status", "non_utf8", b"\xff\xfe")
_field("status", "unknown", "exploded")
_field("origin", "non_utf8", b"def\xffault")
_field("origin", "rejected_id", "../../x")
_field("created_at", "overflow", "99999-12-31T23:59:59.000000Z")
_field("enqueued_at", "non_utf8", b"\xff2026")
_field("timeout", "overflow", "1e999")
_field("timeout", "nan", "nan")
_field("timeout", "negative", "-5", harmless=True)
_field("result_ttl", "nan", "nan")
_field("failure_ttl", "overflow", "1e999")
_field("ttl", "negative", "-1e999")
_field("description", "large", lambda mark: "d" * BIG)
_field("description", "newline", f"x\n{FORGED}", harmless=True)  # logged escaped: see the test
_field("exc_info", "bad_zlib", b"\x00 not zlib", where="failed")
_field("dependency_ids", "bad_json", "[not json")
_field("retries_left", "nan", "nan")
_field("retry_intervals", "bad_json", "[1, 2")
_field("last_heartbeat", "non_utf8", b"\xff")
_field("group_id", "rejected_id", "../../g", harmless=True)
_field("rate_limit_key", "non_utf8", b"default:\xff")


@planter("job hash: signature", "missing")
def _(ctx, mark):
    """A trap: a declared job creating a file, queued without a signature."""
    return Planted(job_ids=[queued(ctx, trap_job(ctx, mark))])


@planter("job hash: signature", "forged")
def _(ctx, mark):
    """A trap: the same with 64 hex digits that are no signature of it."""
    job_id = trap_job(ctx, mark)
    ctx.connection.hset(keys.job_key(job_id), "signature", "0" * 64)
    return Planted(job_ids=[queued(ctx, job_id)])


@planter("job hash: data", "undeclared_function")
def _(ctx, mark):
    """A trap: ``os.system`` creating a file, queued."""
    return Planted(
        job_ids=[
            queued(ctx, job(ctx, f"{mark}-trap", func="os.system", args=[f"touch {ctx.trap / mark}"], signed=False))
        ]
    )


@planter("registry: scheduled", "undeclared_function")
def _(ctx, mark):
    """A trap: ``builtins.exec`` creating a file, due now (RQ's scheduler moves it to the queue)."""
    job_id = job(
        ctx,
        f"{mark}-trap",
        func="builtins.exec",
        args=[f"open({str(ctx.trap / mark)!r}, 'w')"],
        signed=False,
        status=JobStatus.SCHEDULED,
    )
    ctx.connection.zadd(keys.scheduled_key(GOOD), {job_id: 0})
    return Planted(job_ids=[job_id])


@planter("job hash", "wrong_type")
def _(ctx, mark):
    ctx.connection.rpush(keys.job_key(f"{mark}-list"), "a list, not a hash")
    return Planted(job_ids=[queued(ctx, f"{mark}-list")])


@planter("job hash: rate_limit_key", "wrong_type")
def _(ctx, mark):
    """Finding 1: a refused job whose limit keys hold strings (``limits.release`` met WRONGTYPE)."""
    scoped = f"{GOOD}:{mark}"
    for key in (keys.limit_config_key(scoped), keys.limit_allowed_key(scoped), keys.limit_held_key(scoped)):
        ctx.connection.set(key, f"{mark}: a string")
    job_id = queued(ctx, job(ctx, f"{mark}-job", signed=False, fields={"rate_limit_key": scoped}))
    return Planted(marks=[keys.limit_config_key(scoped)], aside=keys.limit_config_key(scoped), job_ids=[job_id])


@planter("job hash: rate_limit_key", "nan")
def _(ctx, mark):
    scoped = f"{GOOD}:{mark}"
    ctx.connection.hset(keys.limit_config_key(scoped), "concurrency", "nan")
    job_id = queued(ctx, job(ctx, f"{mark}-job", signed=False, fields={"rate_limit_key": scoped}))
    return Planted(job_ids=[job_id])


@planter("job hash: rate_limit_key", "overflow")
def _(ctx, mark):
    scoped = f"{GOOD}:{mark}"
    ctx.connection.hset(keys.limit_config_key(scoped), "concurrency", "1e999")
    job_id = queued(ctx, job(ctx, f"{mark}-job", signed=False, fields={"rate_limit_key": scoped}))
    return Planted(job_ids=[job_id])


# --- registries: started, finished, failed, scheduled, deferred, canceled -------------------------------

PLACES = ("started", "finished", "failed", "scheduled", "deferred", "canceled")


def _registry(place):
    @planter(f"registry: {place}", "wrong_type")
    def wrong_type(ctx, mark):
        key = registry_key(place, BAD)
        ctx.connection.set(key, f"{mark}: a string, not a sorted set")
        return Planted(marks=[key], aside=key)

    @planter(f"registry: {place}", "non_utf8")
    def non_utf8(ctx, mark):
        job_id = job(ctx, f"{mark}-x", raw_id=mark.encode() + b"-\xff", status=place)
        ctx.connection.zadd(registry_key(place, GOOD), {member(place, job_id): time.time() + 3600})
        return Planted(job_ids=[job_id])

    @planter(f"registry: {place}", "rejected_id")
    def rejected_id(ctx, mark):
        job_id = job(ctx, f"{mark}-x", raw_id=f"{mark}.dot/{place}", status=place)
        ctx.connection.zadd(registry_key(place, GOOD), {member(place, job_id): time.time() + 3600})
        return Planted(job_ids=[job_id])

    @planter(f"registry: {place}", "negative_score")
    def negative_score(ctx, mark):
        """An unsigned job, so that whoever takes it for real refuses it; rq reads scores from 0 on."""
        job_id = trap_job(ctx, mark, status=place)
        ctx.connection.zadd(registry_key(place, GOOD), {member(place, job_id): -1})
        return Planted(job_ids=[job_id], allowed=kept(place, job_id))

    @planter(f"registry: {place}", "absurd_score")
    def absurd_score(ctx, mark):
        job_id = job(ctx, f"{mark}-job", status=place)
        ctx.connection.zadd(registry_key(place, GOOD), {member(place, job_id): 1e308})
        return Planted(job_ids=[job_id], allowed=kept(place, job_id))


def kept(place, job_id):
    """rq cleans, moves and finds stale entries by scores from 0 to now: an entry scored below 0 or
    far in the future stays where it is until deleted (keeping entries is what a writer can do
    anyway: it fills memory), and its job's page shows it."""

    def check(connection, answers):
        score = connection.zscore(registry_key(place, GOOD), member(place, job_id))
        page = job_page(answers, job_id)
        if score is None or page is None or page.status_code != 200:
            return f"{job_id}: score {score}, page {page and page.status_code}"
        return ""

    return check


for _place in PLACES:
    _registry(_place)


@planter("registry: failed", "large")
def _(ctx, mark):
    job_id = job(ctx, f"{mark}-x", raw_id=mark + "x" * BIG, status=JobStatus.FAILED, signed=False)
    ctx.connection.zadd(keys.failed_key(GOOD), {job_id: "+inf"})
    return Planted(job_ids=[job_id])


@planter("registry: failed", "forged_dead_letter")
def _(ctx, mark):
    """Finding 2: an unsigned job planted as an exhausted dead one (reconcile must not believe it)."""
    job_id = trap_job(ctx, mark, status=JobStatus.FAILED)
    ctx.connection.hset(
        keys.job_key(job_id),
        "meta",
        json.dumps(
            {
                "queue": GOOD,
                "attempt": 1,
                "attempts_allowed": 1,
                "dead": "exhausted",
                "deaths": 1,
                "exc_type": "features.marketplace.client.MarketplaceUnavailable",
                "exc_message": "503",
            }
        ),
    )
    ctx.connection.zadd(keys.failed_key(GOOD), {job_id: "+inf"})

    def check(connection, answers):
        from queues.models import DeadLetter

        row = DeadLetter.objects.filter(job_id=job_id).first()
        return "" if row is not None and row.reason == "unverified" else f"{job_id}'s dead letter: {row and row.reason}"

    return Planted(job_ids=[job_id], required=check)


@planter("executions", "wrong_type")
def _(ctx, mark):
    job_id = job(ctx, f"{mark}-job", status=JobStatus.STARTED)
    ctx.connection.zadd(keys.started_key(GOOD), {f"{job_id}:e1": time.time() - 3600})  # stale: cleaned up
    ctx.connection.set(keys.execution_key(f"{job_id}:e1"), f"{mark}: a string, not a hash")
    ctx.connection.set(keys.job_executions_key(job_id), f"{mark}: a string, not a sorted set")
    return Planted(job_ids=[job_id], allowed=abandoned(job_id))


@planter("executions", "nan")
def _(ctx, mark):
    job_id = job(ctx, f"{mark}-job", status=JobStatus.STARTED)
    ctx.connection.zadd(keys.started_key(GOOD), {f"{job_id}:e1": time.time() - 3600})
    ctx.connection.hset(
        keys.execution_key(f"{job_id}:e1"),
        mapping={"created_at": "nan", "last_heartbeat": "nan", "worker_name": f"{mark}\n{FORGED}", "job_id": job_id},
    )
    ctx.connection.zadd(keys.job_executions_key(job_id), {"e1": time.time() + 3600})
    return Planted(job_ids=[job_id], allowed=abandoned(job_id))


def abandoned(job_id):
    """rq's clean-up of a stale started entry needs nothing of its execution: the job is failed as
    abandoned, whatever the execution's hash held."""

    def check(connection, answers):
        return "" if connection.zscore(keys.failed_key(GOOD), job_id) is not None else f"{job_id} not failed"

    return check


# --- results streams (of finished jobs) ------------------------------------------------------------------


def _results(kind, fields):
    @planter("results stream", kind)
    def plant(ctx, mark):
        job_id = job(ctx, f"{mark}-job", status=JobStatus.FINISHED)
        ctx.connection.zadd(keys.finished_key(GOOD), {job_id: time.time() + 3600})
        key = keys.results_key(job_id)
        if fields is None:
            ctx.connection.set(key, f"{mark}: a string, not a stream")
        else:
            ctx.connection.xadd(key, fields(mark) if callable(fields) else fields)
        return Planted(job_ids=[job_id], aside=key, allowed=shown(job_id) if kind in SHOWN_AS_IS else None)

    return plant


SHOWN_AS_IS = ("nan", "overflow", "large")  # JSON's NaN, a date past 9999 (rq keeps it as text), 5 MB cut
_results("wrong_type", None)
_results("bad_base64", {"type": "1", "return_value": "!!! not base64 !!!", "created_at": "2026-01-01T00:00:00Z"})
_results("bad_json", {"type": "1", "return_value": "bm90IGpzb24=", "created_at": "2026-01-01T00:00:00Z"})
_results("bad_zlib", {"type": "2", "exc_string": "bm90IHpsaWI=", "created_at": "2026-01-01T00:00:00Z"})
_results("non_utf8", {"type": b"\xff", "return_value": b"\xfe", "created_at": b"\xff"})
_results("nan", {"type": "1", "return_value": "TmFO", "created_at": "2026-01-01T00:00:00Z"})  # NaN
_results("overflow", {"type": "1", "return_value": "MQ==", "created_at": "99999-01-01T00:00:00Z"})
_results(
    "large",
    lambda mark: {
        "type": "1",
        "return_value": base64.b64encode(json.dumps("r" * BIG).encode()),
        "created_at": "2026-01-01T00:00:00Z",
    },
)
