"""Coroutine jobs of the ``rqworker --async`` tests (tests/queues/worker/test_async_worker.py).

They log JSON lines as ``tests/jobs/concurrent.py``'s jobs do (``records`` reads them), from the worker's
event loop: ``thread`` is the thread that ran the coroutine, ``job`` what ``get_current_job()`` says there.
"""

import asyncio
import os

from django_tasks import task

import queues
from tests.jobs.concurrent import _log, records


@queues.job
async def wait_for_file(path, release_path, wait_seconds=120):
    """Log a start, await until ``release_path`` exists, log an end; a cancel is logged as such (its ``finally``)."""
    _log(path, event="start")
    ended = False
    try:
        deadline = asyncio.get_running_loop().time() + wait_seconds
        while not os.path.exists(release_path):
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{release_path} never appeared")
            await asyncio.sleep(0.02)
        ended = True
        _log(path, event="end")
        return "released"
    except asyncio.CancelledError:
        _log(path, event="cancelled")
        raise
    finally:
        _log(path, event="finally", ended=ended)


@queues.job
async def fail_async(path, message):
    """Log a start, yield once to the loop, raise RuntimeError(message)."""
    _log(path, event="start")
    await asyncio.sleep(0)
    raise RuntimeError(message)


@task(takes_context=True)
async def task_together(context, path, count, wait_seconds=60):
    """A ``@task`` coroutine (with its TaskContext): log a start, await until ``count`` runs started, log an end."""
    _log(path, event="start", context_attempt=context.attempt)
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while len(records(path, "start")) < count:
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"fewer than {count} runs started together")
        await asyncio.sleep(0.02)
    _log(path, event="end")
    return context.task_result.id


@queues.job
async def pause_async(path, seconds):
    """Log a start, ``await asyncio.sleep(seconds)``, log an end."""
    _log(path, event="start")
    await asyncio.sleep(seconds)  # the job's work: what it does is last ``seconds``
    _log(path, event="end")
    return seconds
