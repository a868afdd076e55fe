"""Receivers of queues.events: count and time jobs in Redis, where every worker and web process
sees the same numbers.

Each event costs one pipelined round trip (no MULTI: the commands are independent increments).
The last 50 completed durations are kept by the receiver, not read back from rq's finished
registry at scrape time: a scrape then costs one LRANGE per queue instead of 50 job hashes, and
the sample survives ``result_ttl=0`` jobs, which rq does not keep in the finished registry.

A receiver never raises: losing one count is better than failing a job (queues.events logs
anything that escapes anyway).
"""
import logging

import redis

from . import store

logger = logging.getLogger("queues.metrics")


def _connection(job):
    connection = getattr(job, "connection", None)
    if connection is not None:
        return connection
    from ..connection import get_connection

    return get_connection()


def _write(queue, job, fill):
    try:
        pipe = _connection(job).pipeline(transaction=False)
        fill(pipe, store.counters_key(queue))
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("could not record an event of queue %r (%s: %s)",
                       queue, type(exc).__name__, exc)


def _observe(pipe, key, duration):
    seconds = max(0.0, float(duration or 0.0))
    pipe.hincrby(key, store.PROCESSED, 1)
    pipe.hincrby(key, store.bucket_field(store.bucket_for(seconds, store.buckets())), 1)
    pipe.hincrbyfloat(key, store.DURATION_SUM, seconds)


def on_job_succeeded(sender=None, *, queue, job=None, duration=None, **kwargs):
    def fill(pipe, key):
        _observe(pipe, key, duration)
        samples = store.durations_key(queue)
        pipe.lpush(samples, round(max(0.0, float(duration or 0.0)) * 1000.0, 3))
        pipe.ltrim(samples, 0, store.DURATION_SAMPLE - 1)

    _write(queue, job, fill)


def on_job_failed(sender=None, *, queue, job=None, duration=None, **kwargs):
    def fill(pipe, key):
        _observe(pipe, key, duration)
        pipe.hincrby(key, store.FAILED, 1)

    _write(queue, job, fill)


def on_job_retry_scheduled(sender=None, *, queue, job=None, **kwargs):
    _write(queue, job, lambda pipe, key: pipe.hincrby(key, store.RETRIED, 1))


def on_job_dead(sender=None, *, queue, job=None, **kwargs):
    _write(queue, job, lambda pipe, key: pipe.hincrby(key, store.DEAD, 1))


def connect():
    """Connect the receivers (idempotent: dispatch_uid)."""
    from .. import events

    events.job_succeeded.connect(on_job_succeeded, dispatch_uid="queues.metrics.succeeded")
    events.job_failed.connect(on_job_failed, dispatch_uid="queues.metrics.failed")
    events.job_retry_scheduled.connect(on_job_retry_scheduled, dispatch_uid="queues.metrics.retry_scheduled")
    events.job_dead.connect(on_job_dead, dispatch_uid="queues.metrics.dead")
