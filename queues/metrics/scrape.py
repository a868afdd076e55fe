"""The scrape of Redis: every declared queue in at most two pipelined round trips, never a write.

Round trip 1 (always), for each queue: LLEN and LINDEX 0 of the queue list and of its high and low
priority bands (``keys.band_keys``: counted as one queue; the age is the head's of the last band that
holds a job, the one that waits behind all others), ZCARD of the started
(``wip``) and scheduled registries, ZCARD and ZCOUNT (the expired part) of the finished and failed
registries, SMEMBERS of the queue's worker set, HGETALL of the recorder's counters and LRANGE of
its last durations; plus one SMEMBERS of the paused set, one of rq's set of limit keys in use
(``<p>:rl-keys``, queues/producer/limits.py), one ZRANGE of the keys with a rate or paused
(``<p>:optima:rate-keys``, queues/producer/rates.py), one HGETALL of the quarantine counts (``<p>:optima:quarantined``,
queues/keyspace/repeats.py) and ``INFO memory`` / ``INFO stats`` of the server (used memory,
maxmemory, evicted keys: queues/connection/info.py). Round trip 2 (only when a queue has a waiting job or
a worker, or some limit key is in use): HGET ``enqueued_at`` of each queue's head job, EXISTS of each
worker key (rq leaves a dead worker in the set until a cleanup) and ZCARD of the held sets of each
limit key of a declared queue, rq's (held by the concurrency) and the rate's (held by the rate, or by a pause):
held jobs per queue, ``optima_queue_held_jobs``. No command writes: rq's ``.count`` on a
registry runs its cleanup (and failure callbacks), which a scrape must never trigger, so the
expired entries that cleanup would remove are counted with ZCOUNT and left out instead.

A planted worker set, counters hash or durations list (of the wrong type, or holding values that are
not numbers in a Redis counter's range) only loses what it holds: 0 workers, counters unknown (left
out, not zeroed), no durations; each such entry reported once (``entries.report``). Any other
command that fails for one queue (wrong type, ACL, ...) zeroes that queue only; a Redis that
refuses, drops or does not answer zeroes all of them. Either way the error gauge says so and one
line is logged; the collector itself never raises, so the rest of /metrics is still served. A
poison head job (an id that is not UTF-8, a key that is not a hash) only loses its queue's age. A
Redis that refuses INFO (an ACL without it) only loses the memory families: left out, not zeroed.
"""

import logging
import math

import redis
from rq.utils import utcparse
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues.connection import info as redisinfo
from queues.connection.clients import mask_url, queues_url
from queues.keyspace import entries, repeats
from queues.keyspace import keys as redis_keys
from queues.keyspace.keys import paused_key
from queues.metrics import redis_memory, store
from queues.metrics.snapshot import QueueSample, describe_error, text
from queues.producer import limits, rates

logger = logging.getLogger("queues.metrics")

PER_QUEUE_COMMANDS = 15  # commands of round trip 1 per queue (see the module docstring)


def read_redis(client, names, samples, now, batches=None):
    """Round trips 1 and 2 into ``samples``; -> (the server's ``redisinfo.Memory``, the quarantine counts
    {kind: count}), each None when unknown. ``batches``, a list: set to ``[{(queue, state): count} or None]``."""
    batches = [] if batches is None else batches

    bounds = store.buckets()
    try:
        pipe = client.pipeline(transaction=False)
        pipe.smembers(paused_key())
        pipe.smembers(redis_keys.limit_keys_key())
        pipe.hgetall(redis_keys.quarantined_key())
        pipe.hgetall(redis_keys.batches_key())  # batches by the queue of their callback and state (workflows)
        pipe.zrange(rates.keys_key(), 0, -1)  # the keys with a rate, or paused: their own held sets
        for name in names:
            queue_key = redis_keys.queue_key(name)
            pipe.llen(queue_key)
            pipe.lindex(queue_key, 0)  # rq pushes at the tail and pops at the head: the oldest
            pipe.zcard(redis_keys.started_key(name))
            pipe.zcard(redis_keys.scheduled_key(name))  # scored by run time, nothing expires
            # Scored by expiry time, -1 or +inf for "forever": what rq's cleanup would remove
            # (ZREMRANGEBYSCORE 0 now) is counted apart and left out, not removed.
            for registry_key in (redis_keys.finished_key(name), redis_keys.failed_key(name)):
                pipe.zcard(registry_key)
                pipe.zcount(registry_key, 0, now)
            pipe.smembers(WORKERS_BY_QUEUE_KEY % name)
            pipe.hgetall(store.counters_key(name))
            pipe.lrange(store.durations_key(name), 0, store.DURATION_SAMPLE - 1)
            high_key, _, low_key = redis_keys.band_keys(queue_key)  # priority bands: one queue with the above
            pipe.llen(high_key)
            pipe.lindex(high_key, 0)
            pipe.llen(low_key)
            pipe.lindex(low_key, 0)
        redisinfo.add_reads(pipe)  # last, so the per-queue rows keep their offsets
        results = pipe.execute(raise_on_error=False)
    except redis.RedisError as exc:
        _all_failed(names, samples, exc)
        return None, None

    memory = redis_memory.from_replies(*results[-2:])
    paused_result, limit_keys_result, quarantined = results[0], results[1], _quarantined(results[2])
    batches[:] = [_batches(results[3], names)]
    rate_keys_result = results[4]
    results = results[5:-2]
    paused = set() if isinstance(paused_result, Exception) else {text(n) for n in paused_result}
    if isinstance(paused_result, Exception):
        logger.warning(
            "reading the paused set failed (%s); queues are reported as not paused", describe_error(paused_result)
        )
    held_keys = _held_keys(limit_keys_result, rate_keys_result, names)
    heads, worker_sets = {}, {}
    for i, name in enumerate(names):
        row = _tolerated(name, results[i * PER_QUEUE_COMMANDS : (i + 1) * PER_QUEUE_COMMANDS])
        errors = [r for r in row if isinstance(r, Exception)]
        sample = samples[name]
        if errors:
            sample.redis_error = True
            logger.warning("reading queue %r failed (%s); it is reported as zeros", name, describe_error(errors[0]))
            continue
        (
            queued,
            head,
            active,
            delayed,
            finished,
            finished_expired,
            failed,
            failed_expired,
            worker_keys,
            counters,
            durations,
            high,
            high_head,
            low,
            low_head,
        ) = row
        queued += high + low
        # The age is the head's of the last band holding a job: low, else normal, else high.
        head = next((h for h in (low_head, head, high_head) if h is not None), None)
        completed, failed = finished - finished_expired, failed - failed_expired
        is_paused = name in paused
        sample.jobs.update(
            waiting=0 if is_paused else queued,
            paused=queued if is_paused else 0,
            active=active,
            delayed=delayed,
            completed=completed,
            failed=failed,
        )
        sample.durations_ms = _durations(name, durations)
        if counters is not None:
            _counters(name, counters, sample, bounds)
        if head is not None and not is_paused:
            heads[name] = head  # as Redis holds it (maybe not UTF-8)
        if worker_keys:
            worker_sets[name] = sorted(text(k) for k in worker_keys)
    held_keys = {name: keys for name, keys in held_keys.items() if not samples[name].redis_error}
    if heads or worker_sets or held_keys:
        _read_round_two(client, heads, worker_sets, samples, now, held_keys)
    return memory, quarantined


BATCH_STATES = ("open", "running", "succeeded", "completed_with_dead", "canceled")  # workflows/state.py STATES
NO_CALLBACK = "(none)"  # the queue label of a batch without a callback (queue names hold no parentheses)


def _batches(reply, names):
    """{(queue, state): count} of ``<p>:optima:batches`` (``queues.workflows.scripts``), every declared queue and
    state present; None when unknown. Fields of another queue or state, or values that are no count, are left out:
    the labels stay bounded."""
    if isinstance(reply, Exception):
        logger.warning("reading the batch counts failed (%s); they are left out", describe_error(reply))
        return None
    counts = {(queue, state): 0 for queue in [*names, NO_CALLBACK] for state in BATCH_STATES}
    for field, value in reply.items():
        queue, _, state = text(field).rpartition("|")
        key = (queue or NO_CALLBACK, state)
        try:
            number = int(text(value))
        except ValueError:
            continue
        if key in counts:
            counts[key] = max(number, 0)
    return counts


def _quarantined(reply):
    """The quarantine counts ({kind: count}, ``keyspace/repeats.py``); None when unknown: a failed read or
    a hash of the wrong type (reported). A kind not in ``repeats.KINDS`` or a value that is no count is
    left out (reported): the label stays bounded."""
    key = redis_keys.quarantined_key()
    if isinstance(reply, Exception):
        if isinstance(reply, redis.ResponseError) and "WRONGTYPE" in str(reply):
            entries.report(key, "not a hash (WRONGTYPE): the quarantine counts left out of /metrics", log=logger)
        else:
            logger.warning("reading %s failed (%s); the quarantine counts are left out", key, describe_error(reply))
        return None
    counts = dict.fromkeys(repeats.KINDS, 0)
    for field, value in reply.items():
        kind, value = text(field), text(value)
        try:
            number = int(value)
        except (TypeError, ValueError):
            number = -1
        if kind not in counts or not 0 <= number < 2**63:
            entries.report(
                key, f"field {kind[:40]!r} = {value[:40]!r} is no count of a known kind: left out", log=logger
            )
            continue
        counts[kind] = number
    return counts


# Round trip 1's replies a bad entry may spoil without spoiling the queue's other values: the worker
# set (offset 8: no workers), the counters (9: unknown) and the durations (10: none).
_WORKERS, _COUNTERS, _DURATIONS = 8, 9, 10


def _tolerated(name, row):
    """``row`` with a wrong-typed worker set, counters hash or durations list reported (once) and read
    as empty / unknown instead of failing the whole queue."""

    row = list(row)
    for offset, key, instead in (
        (_WORKERS, WORKERS_BY_QUEUE_KEY % name, set()),
        (_COUNTERS, store.counters_key(name), None),
        (_DURATIONS, store.durations_key(name), []),
    ):
        reply = row[offset]
        if isinstance(reply, redis.ResponseError) and "WRONGTYPE" in str(reply):
            entries.report(key, "not of the type the scrape reads (WRONGTYPE): left out of /metrics", log=logger)
            row[offset] = instead
    return row


def _durations(name, values):
    """The stored durations (ms) that are finite numbers; the others reported and left out."""
    found = []
    for value in values:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if math.isfinite(number) and number >= 0:
            found.append(number)
        else:
            entries.report(store.durations_key(name), f"entry {text(value[:40])!r} is not a duration", log=logger)
    return found


def _counters(name, counters, sample, bounds):
    """The recorder's counters into ``sample``; a value that is not a whole number in a Redis counter's
    range leaves them unknown (counter samples left out, not zeroed), reported."""
    counters = {text(k): text(v) for k, v in counters.items()}

    def number(field, cast=int):
        try:
            value = cast(counters.get(field, 0))
        except (TypeError, ValueError, OverflowError):
            value = None
        if value is None or not math.isfinite(value) or not 0 <= value < 2**63:
            raise ValueError(field)
        return value

    try:
        sample.counters = {k: number(k) for k in (store.PROCESSED, store.FAILED, store.RETRIED, store.DEAD)}
        sample.counters[store.DURATION_SUM] = number(store.DURATION_SUM, float)
        sample.buckets = {b: number(store.bucket_field(b)) for b in bounds}
        for histogram, attr in ((store.WAIT, "waits"), (store.TOTAL, "totals")):
            sample.counters[histogram.sum_field] = number(histogram.sum_field, float)
            setattr(sample, attr, {b: number(histogram.bucket_field(b)) for b in histogram.bounds()})
    except ValueError as exc:
        entries.report(store.counters_key(name), f"field {exc.args[0]!r} is not a count: counters left out", log=logger)
        sample.counters = sample.buckets = sample.waits = sample.totals = None


def _held_keys(members, rate_members, names):
    """{queue: [held-set key, ...]} of the limit keys in use of the declared ``names``: rq's held set of each
    member of rq's ``<p>:rl-keys`` and the rate held set (queues/producer/rates.py) of each member of
    ``<p>:optima:rate-keys`` (the keys with a rate, and the paused ones); both sets' members are
    ``<queue>:<limit key>``. A failed read of either set is logged: no held counts from it."""

    wanted, found = set(names), {}
    for reply, held_key, what in (
        (members, redis_keys.limit_held_key, "limit keys"),
        (rate_members, rates.held_key, "rate keys"),
    ):
        if isinstance(reply, Exception):
            logger.warning("reading the %s failed (%s); their held jobs are reported as 0", what, describe_error(reply))
            continue
        for member in reply:
            queue_name, limit_key = limits.split(text(member))
            if queue_name in wanted and limit_key:
                found.setdefault(queue_name, set()).add(held_key(text(member)))
    return {name: sorted(keys) for name, keys in found.items()}


def _read_round_two(client, heads, worker_sets, samples, now, held_keys=None):

    held_keys = held_keys or {}
    unique_workers = sorted({k for keys in worker_sets.values() for k in keys})
    try:
        pipe = client.pipeline(transaction=False)
        for job_id in heads.values():
            pipe.hget(redis_keys.job_key_prefix().encode() + job_id, "enqueued_at")
        for key in unique_workers:
            pipe.exists(key)
        for keys in held_keys.values():
            for key in keys:
                pipe.zcard(key)
        results = pipe.execute(raise_on_error=False)
    except redis.RedisError as exc:
        _all_failed(set(heads) | set(worker_sets) | set(held_keys), samples, exc)
        return
    held_results = results[len(heads) + len(unique_workers) :]
    results = results[: len(heads) + len(unique_workers)]
    offset = 0
    for name, keys in held_keys.items():
        counts = held_results[offset : offset + len(keys)]
        offset += len(keys)
        errors = [c for c in counts if isinstance(c, Exception)]
        if errors:  # a held set of the wrong type (planted): this queue's held count only
            logger.warning(
                "reading the held jobs of queue %r failed (%s); reported as 0", name, describe_error(errors[0])
            )
            continue
        samples[name].held = sum(counts)
    for name, enqueued_at in zip(heads, results[: len(heads)]):
        if isinstance(enqueued_at, redis.ResponseError) and "WRONGTYPE" in str(enqueued_at):
            # The head job's key is not a hash (a poison entry): no age, the queue's counts stand.
            logger.warning(
                "the job at the head of queue %r cannot be read (%s); its age is reported as 0",
                name,
                describe_error(enqueued_at),
            )
        elif isinstance(enqueued_at, Exception):
            _queue_failed(name, samples, enqueued_at)
        elif enqueued_at:  # a stale id without its job hash has no age
            try:
                waited = now - utcparse(text(enqueued_at)).timestamp()
            except ValueError:
                continue
            samples[name].oldest_waiting_seconds = max(0.0, waited)
    alive = dict(zip(unique_workers, results[len(heads) :]))
    for name, keys in worker_sets.items():
        errors = [alive[k] for k in keys if isinstance(alive[k], Exception)]
        if errors:
            _queue_failed(name, samples, errors[0])
        else:
            samples[name].workers = sum(1 for k in keys if alive[k])


def _queue_failed(name, samples, exc):
    if not samples[name].redis_error:
        logger.warning("reading queue %r failed (%s); it is reported as zeros", name, describe_error(exc))
    samples[name] = QueueSample(redis_error=True, dead_letters=samples[name].dead_letters)


def _all_failed(names, samples, exc):

    logger.warning(
        "Redis at %s did not answer the scrape (%s); %d queue(s) are reported as zeros",
        mask_url(queues_url()),
        describe_error(exc),
        len(names),
    )
    for name in names:
        samples[name] = QueueSample(redis_error=True)
