"""Recent history: every queue's cumulative completed and failed counts, sampled once a minute and
kept once every ten minutes for 72 hours.

The panel shows completed jobs and failed *attempts* per minute over the last hour and per ten
minutes over the last 72 hours. "Failed" here is the recorder's ``failed`` counter: every attempt
that raised, retried or not; jobs that died (the dead letters) are counted apart, not here. Counting per minute at
each job would add a write per job (the worker's speed budget), so nothing new is written per job:
the recorder's cumulative counters (``store.counters_key(queue)``, fields ``processed`` and
``failed``) are *sampled* once a minute, and the panel draws the differences between samples.

Who samples: the first worker whose heartbeat falls in a new minute (``sample_if_due``, called from
``Housekeeping.flush`` when its heartbeat is due, i.e. every few seconds at most). The lock is
``SET <lock> NX EXAT <start of the next minute>``: one sample per minute whichever worker and
however many, and a panel page never samples (a GET writes nothing). With no worker running there
are no samples, and the panel says so; minutes without a sample show no bar.

Storage: one capped list ``keys.history_key()`` of JSON samples, newest first, trimmed to
``SAMPLES`` (61: sixty per-minute differences), and ``keys.history_coarse_key()``, the same entries
once per ten-minute window, trimmed to ``COARSE_SAMPLES`` (433: 432 ten-minute differences, 72 h).
The coarse list gets the first minute sample of each window: the minute sampler reads its head
(LINDEX 0) in the pipeline of its counter reads and pushes the same entry to it in its write
pipeline when the head is of an earlier window, so the coarse list costs no round trip and no
lock of its own (the minute lock already makes one sampler per minute). Both keys expire a little
after their span (``EXPIRE`` refreshed at each push), so a deployment whose workers stopped leaves
nothing behind. Memory: docs/metrics.md ("History").

    {"t": <unix seconds of the sample>, "q": {"<queue>": [<processed>, <failed>], ...}}

``completed`` is ``processed - failed`` (the recorder counts every attempt that ended as processed).
A counter that went down between two samples (a flushed Redis, a deleted hash) counts as 0 for that
minute, as Prometheus' ``increase()`` would start again from the reset.

What a writer to Redis plants there never stops the sampling: a list of another type is renamed
``<key>.corrupt-<unix time>`` (``keyspace/quarantine.py``) and the sample taken; a 72-hour head more than a
minute in the future (``1e300``, now + 1 day), which kept every later sample out for the key's life, is moved
to such a key; a queue's counters of another type leave that queue out of the sample. Each said once a
minute at most (``keyspace/repeats.py``).

Costs: sampling is three round trips a minute (the lock, one HMGET per queue and the coarse head
pipelined, LPUSH + LTRIM + EXPIRE of one or both lists); reading is one round trip (two LRANGE).
"""

import json
import logging
import math
import time

import redis

from queues.catalog.lookup import queue_names
from queues.keyspace import entries, keys, quarantine, repeats
from queues.metrics import store

logger = logging.getLogger("queues.metrics")

SAMPLES = 61  # samples kept: 60 one-minute differences, the last hour
MINUTE = 60  # seconds
COARSE = 600  # seconds: the 72-hour history's period
COARSE_PERIODS = 72 * 3600 // COARSE  # 432 ten-minute differences
COARSE_SAMPLES = COARSE_PERIODS + 1
FUTURE_SECONDS = MINUTE  # a 72-hour head further ahead of the sampler's clock is no sample (clock skew is less)
SAMPLES_TTL = SAMPLES * MINUTE + 2 * MINUTE  # seconds the minute list outlives its last push
COARSE_TTL = COARSE_SAMPLES * COARSE + 2 * COARSE  # and the 72-hour list


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
        # A history list of another type (``SET <p>:optima:history x``) would stop every sample: set aside.
        quarantine.retry_once(connection, _expected, lambda: sample(connection, at), who="history sample", log=logger)
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
        pipe.lindex(keys.history_coarse_key(), 0)
        replies = pipe.execute(raise_on_error=False)
    rows, head = replies[:-1], replies[-1]
    if isinstance(head, Exception):
        raise head  # the 72-hour list of another type: set aside by the caller (``sample_if_due``)
    counts = {}
    for name, row in zip(names, rows):
        if quarantine.is_wrong_type(row):  # the scrape reports it too; the other queues are still sampled
            entries.report(store.counters_key(name), "not a hash (WRONGTYPE): left out of the history", log=logger)
            continue
        if isinstance(row, Exception):
            raise row
        counts[name] = [_int(row[0]), _int(row[1])]
    head = _set_aside_future_head(connection, head, at)
    entry = json.dumps({"t": round(float(at), 3), "q": counts}, separators=(",", ":"))
    with connection.pipeline(transaction=False) as pipe:
        for key, kept, ttl in (
            (keys.history_key(), SAMPLES, SAMPLES_TTL),
            (keys.history_coarse_key(), COARSE_SAMPLES, COARSE_TTL),
        ):
            if key == keys.history_coarse_key() and not _new_window(head, at):
                continue
            pipe.lpush(key, entry)
            pipe.ltrim(key, 0, kept - 1)
            pipe.expire(key, ttl)
        pipe.execute()


def _expected():
    return {keys.history_key(): "list", keys.history_coarse_key(): "list"}


def _set_aside_future_head(connection, head, at):
    """``head`` (the 72-hour list's head), or None when it was a sample more than ``FUTURE_SECONDS`` ahead of
    ``at``: then it is moved to ``<key>.corrupt-<unix time>`` with a line naming it (``repeats``). Such a head
    (``1e300``, now + 1 day) kept every later sample out of the 72-hour list (``_new_window``) for the key's life."""
    found = None if head is None else _sample(head)
    if found is None or found[0] <= float(at) + FUTURE_SECONDS:
        return head
    key = keys.history_coarse_key()
    aside = f"{key}.corrupt-{int(time.time())}"
    connection.lmove(key, aside, "LEFT", "RIGHT")
    repeats.report(
        repeats.HISTORY,
        key,
        "%s: its head %r is a sample from the future (t=%s, now %s): moved to %s, sampling goes on",
        key,
        entries.text(head[:80]),
        found[0],
        round(float(at)),
        aside,
        log=logger,
        connection=connection,
    )
    return None


def _new_window(head, at):
    """Whether a sample at ``at`` opens a ten-minute window the coarse list's ``head`` is not in. A head
    that is not a sample (or a key of another type: a Redis error) is written over by a new one."""
    if isinstance(head, Exception):
        return False  # a key of another type: left alone (read() reports it)
    sample = None if head is None else _sample(head)
    if sample is None:
        return True
    return math.floor(sample[0] / COARSE) < math.floor(float(at) / COARSE)


def read(connection):
    """The stored samples, oldest first, as ``(t, {queue: (processed, failed)})``. An entry that is
    not a sample (whatever else wrote there: not JSON, over ``entries.HISTORY_BYTES``, a time or a
    count that is not a finite number of the range Redis counters have) is reported once and skipped,
    never raised; a key that is not a list reads as no history."""
    return read_both(connection)[0]


def read_both(connection):
    """``(minute samples, ten-minute samples)``, each as ``read`` returns them, in one round trip."""
    with connection.pipeline(transaction=False) as pipe:
        pipe.lrange(keys.history_key(), 0, SAMPLES - 1)
        pipe.lrange(keys.history_coarse_key(), 0, COARSE_SAMPLES - 1)
        replies = pipe.execute(raise_on_error=False)
    return tuple(_parsed(key, raw) for key, raw in zip((keys.history_key(), keys.history_coarse_key()), replies))


def _parsed(key, raw):
    if isinstance(raw, redis.ResponseError):
        entries.report(key, f"not a list ({raw}): no history shown")
        return []
    if isinstance(raw, Exception):
        raise raw
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
        counts = {
            str(q): (_count(v[0]), _count(v[1])) for q, v in entry["q"].items() if isinstance(v, list) and len(v) == 2
        }
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
    return per_period(samples, now, minutes, MINUTE)


def per_ten_minutes(samples, now, periods=COARSE_PERIODS):
    """``per_minute`` of the ten-minute samples: one entry per ten minutes of the last 72 hours."""
    return per_period(samples, now, periods, COARSE)


def per_period(samples, now, count, period):
    """``per_minute`` for any ``period`` (seconds): ``count`` periods ending with the current one."""
    starts = period_starts(now, count, period)
    first, current = starts[0], starts[-1]
    queues = sorted({q for _, counts in samples for q in counts})
    series = {q: {} for q in queues}
    for (_, before), (after_t, after) in zip(samples, samples[1:]):
        minute = math.floor(after_t / period) * period
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
    return period_starts(now, minutes, MINUTE)


def period_starts(now, count, period):
    """The unix seconds starting each of the last ``count`` periods of ``period`` s, the current one last."""
    current = math.floor(now / period) * period
    return [current - period * i for i in range(count - 1, -1, -1)]


def _int(value):
    try:
        return max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        return 0


def _count(value):
    """A stored count: an int in the range of a Redis counter (HINCRBY's 64 bits), or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        return None
    return value
