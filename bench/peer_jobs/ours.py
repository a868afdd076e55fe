"""This project's benchmark jobs (``QUEUE_JOB_MODULES=bench.peer_jobs.ours``); stock rq runs the very
same functions (``@queues.job`` only registers them, and imports nothing but the standard library)."""

import time

import queues

from .record import io_call, record


@queues.job
def noop(enqueued):
    """Workload A: nothing but the record."""
    record(enqueued, time.time())


@queues.job
def io(enqueued):
    """Workload B: one GET answered after 100 ms, on this thread's keep-alive connection."""
    started = time.time()
    io_call()
    record(enqueued, started)
