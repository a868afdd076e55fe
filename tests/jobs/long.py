"""A long job that resumes (issue 34), for tests/queues/processes/test_resume.py and tests/queues/jobs/test_resume.py.

``walk`` goes over items ``0 .. total - 1`` from its cursor, with one checkpoint per item: the cursor is the
next item to do, and the progress ``done`` of ``total``. Each item appends a JSON line to ``path`` when it
starts and when it is done, with the attempt, the pause count (``interruptions``) and the process, so the test
counts how many times each item ran. The idempotent page loop of docs/workflows.md#long-jobs-that-resume, in small.
"""

import json
import os
import time
from pathlib import Path

from django_tasks import task

import queues
from tests.jobs import hold_until, work


def _log(path, **record):
    job = queues.current_job()
    meta = job.meta if job is not None else {}
    record.update(
        pid=os.getpid(), at=time.time(), attempt=meta.get("attempt"), interruptions=meta.get("interruptions", 0)
    )
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def records(path):
    """The lines ``walk`` wrote so far (a missing file: none)."""
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def done(path):
    """The items done, in order, one entry per time one was done."""
    return [r["item"] for r in records(path) if r["event"] == "done"]


def started(path):
    return [r["item"] for r in records(path) if r["event"] == "start"]


def _walk(path, total, hold_at=None, release=None, fail_at=None, step_seconds=0.0):
    job = queues.current_job()
    first = 0 if job is None or job.cursor is None else job.cursor["next"]
    _log(path, event="run", cursor=first)
    for item in range(first, total):
        _log(path, event="start", item=item)
        if item == hold_at and release is not None:  # the test acts while this item is in flight
            hold_until(lambda: Path(release).exists(), 120, f"{release} was not created")
        if item == fail_at and job is not None and job.attempt == 1:
            raise RuntimeError(f"item {item} fails on the first attempt, on purpose")
        work(step_seconds)
        _log(path, event="done", item=item)
        if job is not None:
            job.checkpoint({"next": item + 1}, done=item + 1, total=total)
    return total


@queues.job
def walk(path, total, hold_at=None, release=None, fail_at=None, step_seconds=0.0):
    """Items ``cursor .. total - 1``, one checkpoint after each. ``hold_at``: that item waits for the file
    ``release`` to exist; ``fail_at``: that item raises on the first attempt; ``step_seconds``: each item lasts
    that long (for ``max_run_seconds``)."""
    return _walk(path, total, hold_at, release, fail_at, step_seconds)


@queues.job
def checkpoint_badly(kind):
    """A checkpoint ``queues.current_job()`` refuses: ``kind`` "set" (not JSON), "nan", "big" (past the bound),
    "done_alone" (``done=`` without ``total=``)."""
    job = queues.current_job()
    if kind == "set":
        job.checkpoint({1, 2})
    elif kind == "nan":
        job.checkpoint({"next": float("nan")})
    elif kind == "big":
        job.checkpoint("x" * 20_000)
    elif kind == "done_alone":
        job.checkpoint({"next": 1}, done=1)


@task
def walk_task(path, total, hold_at=None, release=None):
    """``walk`` as a Django Task (``@task``): the same cursor and checkpoints."""
    return _walk(path, total, hold_at, release)
