"""Where the coroutine an ``async def`` job returns is run: rq's own ``asyncio.run`` (a new event loop per
job, in the job's thread), or the one event loop of an ``rqworker --async N`` worker.

rq 3 runs a job's coroutine with ``asyncio.run`` inside ``Job.perform`` (``OptimaJob`` overrides that one
step, ``queues/catalog/classes.py``). An ``--async`` worker (``queues/worker/asyncworker.py``) installs a
runner in each of its job threads for the job's duration: the thread hands the coroutine to the worker's
loop and waits for its outcome there, so that every other step of the job (its start, success or failure,
retries, dead letters, metrics, tracing) is the same code as for any job. Every other process (the forking
worker's horse, ``--no-fork``, ``--concurrency``, inline mode) installs nothing and keeps rq's behaviour.

A leaf: imports nothing of queues (any room may import it).
"""

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

Runner = Callable[[Coroutine[Any, Any, Any]], Any]

_here = threading.local()


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """The coroutine's result, run by this thread's runner (an ``--async`` worker's loop) or by ``asyncio.run``."""
    runner = getattr(_here, "runner", None)
    if runner is None:
        return run_alone(coro)
    return runner(coro)


def run_alone(coro: Coroutine[Any, Any, Any]) -> Any:
    """rq's way: the coroutine on an event loop of its own (``asyncio.run``) in this thread."""
    return asyncio.run(coro)


@contextmanager
def running_with(runner: Runner) -> Iterator[None]:
    """Within the block, coroutines of jobs this thread performs are handed to ``runner``."""
    before = getattr(_here, "runner", None)
    _here.runner = runner
    try:
        yield
    finally:
        _here.runner = before
