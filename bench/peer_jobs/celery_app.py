"""Celery's benchmark tasks (the bench's own virtual environment): Redis broker, no result backend,
Celery's defaults otherwise (acks on receipt, prefetch multiplier 4); ``BENCH_CELERY_ACKS_LATE=1`` acks after the
task ran (``task_acks_late``: at-least-once, as this project's workers are; bench/redis_cost.py sets it).

    celery -A bench.peer_jobs.celery_app worker --pool threads --concurrency 32
"""

import os
import time

from celery import Celery

from .record import io_call, record

app = Celery("bench", broker=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    worker_redirect_stdouts=False,
    task_acks_late=os.environ.get("BENCH_CELERY_ACKS_LATE") == "1",
)


@app.task(name="bench.noop")
def noop(enqueued):
    record(enqueued, time.time())


@app.task(name="bench.io")
def io(enqueued):
    started = time.time()
    io_call()
    record(enqueued, started)
