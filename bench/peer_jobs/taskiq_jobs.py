"""taskiq's benchmark tasks (``async def``, one event loop; the bench's own virtual environment): taskiq-redis's
``RedisStreamBroker`` (a Redis stream read by a consumer group, each message acknowledged with XACK after the
task ran: taskiq's default ``--ack-type when_saved``; unacknowledged ones claimed again after 10 minutes: at least
once, as this project's workers are), no result backend, taskiq's defaults otherwise.

    taskiq worker bench.peer_jobs.taskiq_jobs:broker --workers 1 --max-async-tasks 32

(taskiq-redis's ``ListQueueBroker`` pops with BRPOP and never acknowledges: at most once, so not that one.)
"""

import os
import time

from taskiq_redis import RedisStreamBroker

from .record import aio_call, record

broker = RedisStreamBroker(url=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))


@broker.task(task_name="bench.noop")
async def noop(enqueued):
    record(enqueued, time.time())


@broker.task(task_name="bench.io")
async def io(enqueued):
    started = time.time()
    await aio_call()
    record(enqueued, started)
