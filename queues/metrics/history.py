"""Recent history: every queue's cumulative completed and failed counts, sampled once a minute.

The panel shows completed and failed jobs per minute over the last hour. Counting per minute at
each job would add a write per job (the worker's speed budget), so nothing new is written per job:
the recorder's cumulative counters (``store.counters_key(queue)``, fields ``processed`` and
``failed``) are *sampled* once a minute, and the panel draws the differences between samples.

Who samples: the first worker whose heartbeat falls in a new minute (``sample_if_due``, called from
``Housekeeping.flush`` when its heartbeat is due, i.e. every few seconds at most). The lock is
``SET <lock> NX EXAT <start of the next minute>``: one sample per minute whichever worker and
however many, and a panel page never samples (a GET writes nothing). With no worker running there
are no samples, and the panel says so; minutes without a sample show no bar.

Storage: one capped list ``keys.history_key()`` of JSON samples, newest first, trimmed to
``SAMPLES`` (61: sixty per-minute differences):

    {"t": <unix seconds of the sample>, "q": {"<queue>": [<processed>, <failed>], ...}}

``completed`` is ``processed - failed`` (the recorder counts every attempt that ended as processed).
A counter that went down between two samples (a flushed Redis, a deleted hash) counts as 0 for that
minute, as Prometheus' ``increase()`` would start again from the reset.

Costs: sampling is three round trips a minute (the lock, one HMGET per queue pipelined, LPUSH +
LTRIM); reading is one LRANGE.
"""
import json
import logging
import math
import time

import redis

from queues.catalog.lookup import queue_names
from queues.keyspace import entries, keys
from queues.metrics import store

logger = logging.getLogger("queues.metrics")

SAMPLES = 61  # samples kept: 60 one-minute differences, the last hour
MINUTE = 60  # seconds


def sample_if_due(connection, at=None):
    """Take this minute's sample unless some process already did; True when this call sampled.

    ``at`` (unix seconds, default now) exists for the tests. Never raises: a lost sample is a
    missing bar, never a worker's problem.
    """
    at = time.time() if at is None else float(at)
    next_minute = (math.floor(at / MINUTE) + 1) * MINUTE
    try:
        if not connection.set(keys.history_lock_key(), int(at), nx=True, exat=int(next_minute)):
            return False
        sample(connection, at)
    except redis.RedisError as exc:
        logger.warning("could not sample the queues' history (%s: %s)", type(exc).__name__, exc)
        return False
    return True


def sample(connection, at):
    """Append one sample of every declared queue's cumulative counters (unconditionally)."""
    names = queue_names()
    with connection.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.hmget(store.counters_key(name), store.PROCESSED, store.FAILED)
        rows = pipe.execute()
    counts = {name: [_int(processed), _int(failed)] for name, (processed, failed) in zip(names, rows)}
    entry = json.dumps({"t": round(float(at), 3), "q": counts}, separators=(",", ":"))
    with connection.pipeline(transaction=False) as pipe:
        pipe.lpush(keys.history_key(), entry)
        pipe.ltrim(keys.history_key(), 0, SAMPLES - 1)
        pipe.execute()


def read(connection):
    """The stored samples, oldest first, as ``(t, {queue: (processed, failed)})``. An entry that is
    not a sample (whatever else wrote there: not JSON, over ``entries.HISTORY_BYTES``, a time or a
    count that is not a finite number of the range Redis counters have) is reported once and skipped,
    never raised; a key that is not a list reads as no history."""
    key = keys.history_key()
    try:
        raw = connection.lrange(key, 0, SAMPLES - 1)
    except redis.ResponseError as exc:
        entries.report(key, f"not a list ({exc}): no history shown")
        return []
    samples = []
    for item in reversed(raw):
        sample = _sample(item)
        if sample is None:
            entries.report(key, f"entry {entries.text(item[:80])!r} is not a sample")
            continue
        samples.append(sample)
    samples.sort(key=lambda sample: sample[0])
    return samples


def _sample(item):
    """``(t, counts)`` of one stored entry, or None when it is not a sample."""
    if len(item) > entries.HISTORY_BYTES:
        return None
    try:
        entry = json.loads(item)
        at = float(entry["t"])
        counts = {str(q): (_count(v[0]), _count(v[1])) for q, v in entry["q"].items()
                  if isinstance(v, list) and len(v) == 2}
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError):
        return None
    if not math.isfinite(at) or None in (c for pair in counts.values() for c in pair):
        return None
    return at, counts


def per_minute(samples, now, minutes=MINUTE):
    """``{queue: [(minute_start, completed, failed) or (minute_start, None, None), ...]}``: one
    entry per minute of the last ``minutes`` ending with the current one, oldest first.

    Each difference between two consecutive samples goes to the minute of the later sample (samples
    are taken at most once a minute, early in it); a minute without a sample has ``None``s. A
    counter that went down counts 0 (a reset).
    """
    starts = minute_starts(now, minutes)
    first, current = starts[0], starts[-1]
    queues = sorted({q for _, counts in samples for q in counts})
    series = {q: {} for q in queues}
    for (before_t, before), (after_t, after) in zip(samples, samples[1:]):
        minute = math.floor(after_t / MINUTE) * MINUTE
        if minute < first or minute > current:
            continue
        for queue in queues:
            if queue not in before or queue not in after:
                continue
            (p0, f0), (p1, f1) = before[queue], after[queue]
            failed = max(0, f1 - f0)
            completed = max(0, (p1 - f1) - (p0 - f0))
            c, f = series[queue].get(minute, (0, 0))  # two samples in a minute (a lost lock): add up
            series[queue][minute] = (c + completed, f + failed)
    return {q: [(m, *series[q].get(m, (None, None))) for m in starts] for q in queues}


def minute_starts(now, minutes=MINUTE):
    """The unix seconds starting each of the last ``minutes`` minutes, the current one last."""
    current = math.floor(now / MINUTE) * MINUTE
    return [current - MINUTE * i for i in range(minutes - 1, -1, -1)]


def _int(value):
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        return 0


def _count(value):
    """A stored count: an int in the range of a Redis counter (HINCRBY's 64 bits), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2 ** 63:
        return None
    return value
