"""dramatiq's benchmark actors (the bench's own virtual environment): Redis broker, dramatiq's
default middleware (retries, age and time limits, callbacks, pipelines, ...).

    dramatiq bench.peer_jobs.dramatiq_jobs --processes 1 --threads 32
"""

import os
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from .record import io_call, record

dramatiq.set_broker(RedisBroker(url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")))


@dramatiq.actor(actor_name="noop", max_retries=0)
def noop(enqueued):
    record(enqueued, time.time())


@dramatiq.actor(actor_name="io", max_retries=0)
def io(enqueued):
    started = time.time()
    io_call()
    record(enqueued, started)
