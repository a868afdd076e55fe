"""Job functions of the at-least-once, shutdown and outage tests (importable by real workers).

Each run appends JSON lines to a file the test reads: ``{"event": "start", ...}`` when a run begins
and ``{"event": "end", ...}`` when it returns, with the process id, the time and the attempt.
"""

import json
import os
import time

from rq import get_current_job

import queues
from tests.jobs import hold_until, work


def _log(path, **record):
    job = get_current_job()
    meta = job.meta if job is not None else {}
    record.update(
        pid=os.getpid(), at=time.time(), attempt=meta.get("attempt"), interruptions=meta.get("interruptions", 0)
    )
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


@queues.job
def runs(path):
    """The records written so far (a missing file: none)."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


@queues.job
def starts(path):
    return [r for r in runs(path) if r["event"] == "start"]


@queues.job
def ends(path):
    return [r for r in runs(path) if r["event"] == "end"]


@queues.job
def logged_sleep(path, first_run_seconds=0.0, later_run_seconds=0.0, value="done"):  # a job named by dotted path
    """Log a start, sleep (longer on the very first run), log an end, return ``value``."""
    first = not starts(path)
    _log(path, event="start")
    work(first_run_seconds if first else later_run_seconds)
    _log(path, event="end")
    return value


@queues.job
def wait_for_file_then_return(path, release_path, value="done", wait_seconds=120):
    """Log a start, wait until ``release_path`` exists (the test's go signal), log an end."""
    _log(path, event="start")
    hold_until(lambda: os.path.exists(release_path), wait_seconds, f"{release_path} never appeared")
    _log(path, event="end")
    return value


@queues.job
def wait_for_file_then_fail(path, release_path, wait_seconds=120):
    """Log a start, wait until ``release_path`` exists (the test's go signal), then raise."""
    _log(path, event="start")
    hold_until(lambda: os.path.exists(release_path), wait_seconds, f"{release_path} never appeared")
    _log(path, event="end")
    raise RuntimeError("failed once released")


@queues.job
def quick(path, n):
    """A short job of a flood: logs one start and one end with its number."""
    _log(path, event="start", n=n)
    work(0.02)  # short, yet long enough for a kill to land inside it
    _log(path, event="end", n=n)
    return n


@queues.job
def fail_on_first_run(path, first_run_seconds=0.0):
    """Log a start; the very first run sleeps ``first_run_seconds`` then raises; later runs succeed."""
    first = not starts(path)
    _log(path, event="start")
    if first:
        work(first_run_seconds)  # before it fails
        _log(path, event="fail")
        raise RuntimeError("first run fails")
    _log(path, event="end")
    return "done"
