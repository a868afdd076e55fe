"""arq's benchmark jobs (``async def``, one event loop; the bench's own virtual environment), arq's
defaults otherwise (results kept an hour, the queue polled every 0.5 s when it runs dry).

    arq bench.peer_jobs.arq_jobs.WorkerSettings        # BENCH_CONCURRENCY: max_jobs (32)
"""

import os
import time

from arq.connections import RedisSettings

from .record import aio_call, record


async def noop(ctx, enqueued):
    record(enqueued, time.time())


async def io(ctx, enqueued):
    started = time.time()
    await aio_call()
    record(enqueued, started)


class WorkerSettings:
    functions = [noop, io]
    redis_settings = RedisSettings.from_dsn(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "32"))
