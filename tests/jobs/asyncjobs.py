"""Coroutine jobs of the ``rqworker --async`` tests (tests/queues/worker/test_async_worker.py).

They log JSON lines as ``tests/jobs/concurrent.py``'s jobs do (``records`` reads them), from the worker's
event loop: ``thread`` is the thread that ran the coroutine, ``job`` what ``get_current_job()`` says there.
"""

import asyncio
import os

from django_tasks import task

import queues
from tests.jobs import long
from tests.jobs.concurrent import _log, records


async def until(predicate, wait_seconds, timeout_message):
    """In a coroutine job: poll ``predicate`` on the loop until it holds; past ``wait_seconds``, TimeoutError."""
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(timeout_message)
        await asyncio.sleep(0.02)  # the poll interval of a condition wait, yielding to the other coroutines


@queues.job
async def wait_for_file(path, release_path, wait_seconds=120):
    """Log a start, await until ``release_path`` exists, log an end; a cancel is logged as such (its ``finally``)."""
    _log(path, event="start")
    ended = False
    try:
        await until(lambda: os.path.exists(release_path), wait_seconds, f"{release_path} never appeared")
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
    """Log a start, raise RuntimeError(message)."""
    _log(path, event="start")
    raise RuntimeError(message)


@task(takes_context=True)
async def task_together(context, path, count, wait_seconds=60):
    """A ``@task`` coroutine (with its TaskContext): log a start, await until ``count`` runs started, log an end."""
    _log(path, event="start", context_attempt=context.attempt)
    await until(lambda: len(records(path, "start")) >= count, wait_seconds, f"fewer than {count} runs started together")
    _log(path, event="end")
    return context.task_result.id


@queues.job
async def pause_async(path, seconds):
    """Log a start, ``await asyncio.sleep(seconds)``, log an end."""
    _log(path, event="start")
    await asyncio.sleep(seconds)  # the job's work: what it does is last ``seconds``
    _log(path, event="end")
    return seconds


@queues.job
async def ignore_cancel(path, seconds):
    """Log a start, then run ``seconds`` swallowing every cancel (a coroutine a timeout cannot stop)."""
    _log(path, event="start")
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        try:
            await until(lambda: asyncio.get_running_loop().time() >= deadline, seconds, None)
        except asyncio.CancelledError:
            _log(path, event="cancel ignored")
    _log(path, event="end")


@queues.job
async def walk_async(path, total, hold_at=None, release=None):
    """``tests.jobs.long.walk`` as a coroutine: items ``cursor .. total - 1``, a checkpoint after each; item
    ``hold_at`` waits (on the loop) for the file ``release``."""
    job = queues.current_job()
    first = 0 if job.cursor is None else job.cursor["next"]
    long._log(path, event="run", cursor=first)
    for item in range(first, total):
        long._log(path, event="start", item=item)
        if item == hold_at:  # the test acts while this item is in flight
            await until(lambda: os.path.exists(release), 120, f"{release} was not created")
        long._log(path, event="done", item=item)
        job.checkpoint({"next": item + 1}, done=item + 1, total=total)
    return total
