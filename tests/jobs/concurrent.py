"""Job functions of the ``rqworker --concurrency`` tests (tests/queues/worker/test_concurrency.py).

Each run appends JSON lines to a file the test reads (``{"event": "start", "job": ..., "thread": ...}``).
Their waits are Python loops of short sleeps: an exception raised into the job's thread (a timeout,
a stop) is seen within one of them, as it would be in a job doing HTTP calls with timeouts.
"""

import asyncio
import json
import os
import threading
import time

from rq import get_current_job

import queues
from tests.jobs import hold_until, work


def _log(path, **record):
    job = get_current_job()
    meta = job.meta if job is not None else {}
    record.update(
        pid=os.getpid(),
        thread=threading.get_ident(),
        at=time.time(),
        attempt=meta.get("attempt"),
        job=job.id if job is not None else None,
    )
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()


def records(path, event=None):
    try:
        with open(path) as f:
            found = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [r for r in found if event is None or r["event"] == event]


@queues.job
def together(path, count, wait_seconds=60):
    """Log a start, then wait until ``count`` runs have started (all of them at once), log an end."""
    _log(path, event="start")
    hold_until(
        lambda: len(records(path, "start")) >= count,
        wait_seconds,
        f"fewer than {count} jobs started together",
    )
    _log(path, event="end")
    return threading.get_ident()


@queues.job
async def together_async(path, count, wait_seconds=60):
    """``together`` as a coroutine: it waits with ``await asyncio.sleep``."""
    _log(path, event="start")
    deadline = time.monotonic() + wait_seconds
    while len(records(path, "start")) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(records(path, 'start'))} of {count} jobs started together")
        await asyncio.sleep(0.02)  # the poll interval of a condition wait, yielding to the other coroutines
    _log(path, event="end")
    return "async done"


@queues.job
def hold(path, release_path, wait_seconds=120):
    """Log a start, wait until ``release_path`` exists, log an end."""
    _log(path, event="start")
    hold_until(lambda: os.path.exists(release_path), wait_seconds, f"{release_path} never appeared")
    _log(path, event="end")
    return "released"


@queues.job
def spin(path, seconds):
    """Log a start, loop in Python for ``seconds`` (no blocking call), log an end."""
    _log(path, event="start")
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
    _log(path, event="end")
    return n


@queues.job
def touch_db():
    """One query through Django's connection of this thread."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone()[0]


@queues.job
def pause(path, seconds):
    """Log a start, sleep ``seconds``, log an end."""
    _log(path, event="start")
    work(seconds)
    _log(path, event="end")
    return seconds


@queues.job
def database_connections():
    """How many database connections (DB-API connection objects, any thread's) this process holds."""
    import gc

    return sum(
        1
        for obj in gc.get_objects()
        if type(obj).__name__.lower() == "connection"
        and type(obj).__module__.split(".")[0] in ("sqlite3", "psycopg", "psycopg2")
    )


@queues.job
def sleep_in_c(path, seconds):
    """Log a start, then ``work``: one ``time.sleep`` (a C call: an exception raised into the thread waits for it)."""
    _log(path, event="start")
    work(seconds)  # one time.sleep
    _log(path, event="end")
    return seconds
