"""Receivers of queues.events.signals: count and time jobs in Redis, where every worker and web process
sees the same numbers.

Outside a worker (web, commands, rqscheduler) each event is written at once, in one pipelined
round trip. Inside a worker the receivers only add to a ``Tally`` of this process, and the worker
writes it out in the pipeline of its next heartbeat, right after each job (``Tally.flush_into``):
no round trip of its own, and the increments of several events of a queue are merged into one
command each. A work horse is a fork, so its tally is handed to its worker through the worker's
pipe before the horse exits (``hook.py``: ``hand_over`` / ``take_over``); what a horse killed with
SIGKILL counted is lost with it. The worker imports none of this: ``hook.MetricsHook`` is its side.

The last 50 completed durations are kept by the receiver, not read back from rq's finished
registry at scrape time: a scrape then costs one LRANGE per queue instead of 50 job hashes, and
the sample survives ``result_ttl=0`` jobs, which rq does not keep in the finished registry.

A fork-free worker writes the metrics of a success in the very MULTI that records it
(``queues/worker/fastpath.py``): the hook counts the success into the tally (``count_success``, at the
worker's ``before_success_write``) before that MULTI, and marks it counted for this thread, so that the
receiver of its ``job_succeeded`` does not count it twice.

A receiver never raises: losing one count is better than failing a job (queues.events.signals logs
anything that escapes anyway).
"""

import datetime
import logging
import threading
import time
from collections import defaultdict

import redis

from queues.connection.clients import get_connection
from queues.events import signals as events
from queues.jobs import meta as jobmeta
from queues.metrics import store

logger = logging.getLogger("queues.metrics")

TRIM_EVERY = 10  # samples pushed per queue between two LTRIMs (the list holds at most 50 + this)


class Tally:
    """Events counted in this process, not yet written: per queue, hash increments and samples."""

    def __init__(self):
        self._lock = threading.Lock()
        self.deferred = False  # True in a worker: written by flush_into, not at each event
        self._clear()

    def _clear(self):
        self.counts = defaultdict(lambda: defaultdict(int))  # queue -> field -> int
        self.sums = defaultdict(float)  # queue -> seconds
        self.other_sums = defaultdict(lambda: defaultdict(float))  # queue -> sum field (wait, total) -> seconds
        self.samples = defaultdict(list)  # queue -> [ms], oldest first
        self.pushed = defaultdict(int)  # queue -> samples pushed since the last LTRIM

    def add(self, queue, fields, duration=None, sample=False):
        with self._lock:
            for name in fields:
                self.counts[queue][name] += 1
            if duration is not None:
                self.sums[queue] += duration
            if sample:
                self.samples[queue].append(round(duration * 1000.0, 3))

    def observe(self, queue, histogram, seconds):
        """One observation of ``histogram`` (``store.WAIT``, ``store.TOTAL``): its bucket and its sum."""
        seconds = max(0.0, float(seconds))
        field = histogram.observed(seconds)
        with self._lock:
            self.counts[queue][field] += 1
            self.other_sums[queue][histogram.sum_field] += seconds

    def pending(self):
        return bool(self.counts or self.sums or self.samples or self.other_sums)

    def drain(self):
        """The pending events as plain data (JSON-able), forgetting them here."""
        with self._lock:
            data = {
                "counts": {q: dict(f) for q, f in self.counts.items()},
                "sums": dict(self.sums),
                "samples": dict(self.samples),
                "other_sums": {q: dict(f) for q, f in self.other_sums.items()},
            }
            pushed = self.pushed
            self._clear()
            self.pushed = pushed
        return data

    def merge(self, data):
        with self._lock:
            for queue, fields in data.get("counts", {}).items():
                for name, n in fields.items():
                    self.counts[queue][name] += int(n)
            for queue, seconds in data.get("sums", {}).items():
                self.sums[queue] += float(seconds)
            for queue, values in data.get("samples", {}).items():
                self.samples[queue].extend(float(v) for v in values)
            for queue, fields in data.get("other_sums", {}).items():
                for name, seconds in fields.items():
                    self.other_sums[queue][name] += float(seconds)

    def flush_into(self, pipe):
        """Queue the writes of everything pending into ``pipe`` (the caller executes it). Returns
        the drained data, to ``merge`` back if the pipeline fails."""
        data = self.drain()
        for queue, fields in data["counts"].items():
            key = store.counters_key(queue)
            for name, n in fields.items():
                pipe.hincrby(key, name, n)
        for queue, seconds in data["sums"].items():
            pipe.hincrbyfloat(store.counters_key(queue), store.DURATION_SUM, seconds)
        for queue, fields in data["other_sums"].items():
            for name, seconds in fields.items():
                pipe.hincrbyfloat(store.counters_key(queue), name, seconds)
        for queue, values in data["samples"].items():
            key = store.durations_key(queue)
            pipe.lpush(key, *values)
            self.pushed[queue] += len(values)
            if self.pushed[queue] >= TRIM_EVERY or len(values) >= store.DURATION_SAMPLE:
                pipe.ltrim(key, 0, store.DURATION_SAMPLE - 1)
                self.pushed[queue] = 0
        return data


tally = Tally()


def _connection(job):
    connection = getattr(job, "connection", None)
    return get_connection() if connection is None else connection


def _record(queue, job, fields, duration=None, sample=False):
    seconds = None if duration is None else max(0.0, float(duration or 0.0))
    tally.add(queue, fields, seconds, sample)
    if tally.deferred:
        return
    try:
        pipe = _connection(job).pipeline(transaction=False)
        tally.flush_into(pipe)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("could not record an event of queue %r (%s: %s)", queue, type(exc).__name__, exc)


_counted = threading.local()  # per thread: the job whose success count_success counted already


def _observed(seconds):
    return (store.PROCESSED, store.observed_field(seconds or 0.0))


def count_success(queue, duration, job=None):
    """Count a success into the tally (for the caller to write, ``Tally.flush_into``) ahead of its
    ``job_succeeded`` signal, which the receiver then skips (once, in this thread)."""
    _counted.job = job
    seconds = max(0.0, float(duration or 0.0))
    tally.add(queue, _observed(seconds), seconds, sample=True)
    _add_total(queue, job)


# -- wait and total (issue 22): observed from the job's meta (queues/jobs/meta.py), into the same tally --
def _since(start, end=None):
    """Seconds from ``start`` (unix seconds) to ``end`` (default now); None when ``start`` is unknown."""
    if start is None:
        return None
    end = time.time() if end is None else end
    return max(0.0, end - start)


def _timestamp(moment):
    if moment is None:
        return None
    return moment.replace(tzinfo=moment.tzinfo or datetime.UTC).timestamp()


def _add_total(queue, job, ended=None):
    """Observe the job's total (first enqueue -> ``ended``, default now) into the tally."""
    if job is None or not hasattr(job, "meta"):
        return
    try:
        seconds = _since(jobmeta.first_enqueued(job), ended or _timestamp(getattr(job, "ended_at", None)))
    except (TypeError, ValueError, AttributeError, OverflowError):
        return
    if seconds is not None:
        tally.observe(queue, store.TOTAL, seconds)


def on_job_started(sender=None, *, queue, job=None, **kwargs):
    """The attempt's wait (ready -> started) into the tally: written with the job's outcome, no write now."""
    if job is None or not hasattr(job, "meta"):
        return
    try:
        seconds = _since(jobmeta.ready_since(job), _timestamp(getattr(job, "started_at", None)))
    except (TypeError, ValueError, AttributeError, OverflowError):
        return
    if seconds is None:
        return
    tally.observe(queue, store.WAIT, seconds)
    if not tally.deferred:
        _record(queue, job, ())


def on_job_succeeded(sender=None, *, queue, job=None, duration=None, **kwargs):
    if job is not None and getattr(_counted, "job", None) is job:
        _counted.job = None  # counted by count_success, written with the success itself
        return
    _add_total(queue, job)
    _record(queue, job, _observed(duration), duration or 0.0, sample=True)


def on_job_failed(sender=None, *, queue, job=None, duration=None, **kwargs):
    _record(queue, job, _observed(duration) + (store.FAILED,), duration or 0.0)


def on_job_retry_scheduled(sender=None, *, queue, job=None, **kwargs):
    _record(queue, job, (store.RETRIED,))


def on_job_dead(sender=None, *, queue, job=None, **kwargs):
    _add_total(queue, job, time.time())
    _record(queue, job, (store.DEAD,))


def connect():
    """Connect the receivers (idempotent: dispatch_uid)."""
    events.job_started.connect(on_job_started, dispatch_uid="queues.metrics.started")
    events.job_succeeded.connect(on_job_succeeded, dispatch_uid="queues.metrics.succeeded")
    events.job_failed.connect(on_job_failed, dispatch_uid="queues.metrics.failed")
    events.job_retry_scheduled.connect(on_job_retry_scheduled, dispatch_uid="queues.metrics.retry_scheduled")
    events.job_dead.connect(on_job_dead, dispatch_uid="queues.metrics.dead")
