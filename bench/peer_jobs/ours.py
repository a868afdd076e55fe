"""This project's benchmark jobs (``QUEUE_JOB_MODULES=bench.peer_jobs.ours``); stock rq runs the very
same functions (``@queues.job`` only registers them, and imports nothing but the standard library)."""

import asyncio
import time

import queues

from .record import aio_call, io_call, record


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


@queues.job
async def noop_async(enqueued):
    """Workload A as a coroutine (``rqworker --async``)."""
    record(enqueued, time.time())


@queues.job
async def io_async(enqueued):
    """Workload B as a coroutine: the GET on a keep-alive connection of the event loop (as arq's job)."""
    started = time.time()
    await aio_call()
    record(enqueued, started)


@queues.job
async def nap_async(enqueued, seconds=0.1):
    """bench/async_jobs.py's job: ``await asyncio.sleep(seconds)``, then the record."""
    started = time.time()
    await asyncio.sleep(seconds)
    record(enqueued, started)
