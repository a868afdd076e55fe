"""Job functions of the lifecycle tests (module-level, importable by real workers)."""

import os

import queues
from queues import PermanentError, RetryAfter
from tests.jobs import work


class BadInput(Exception):
    """Declared non_retryable on the tests' ``lifecycle`` queue (tests/support/lifecycle_settings.py)."""


@queues.job
def fail(message="boom"):
    raise RuntimeError(message)


@queues.job
def fail_permanently(message="bad data", **context):
    raise PermanentError(message)


@queues.job
def fail_bad_input(message="bad input"):
    raise BadInput(message)


@queues.job
def rate_limited(seconds):
    raise RetryAfter(seconds, "429 Too Many Requests")


@queues.job
def sleep(seconds):  # a job other tests name by its dotted path; its work is tests.jobs.work
    work(seconds)
    return seconds


@queues.job
def count_runs(path, fail_times=0):
    """Append a line per run to ``path``; raise on the first ``fail_times`` runs."""
    with open(path, "a") as f:
        f.write(f"{os.getpid()}\n")
    with open(path) as f:
        runs = len(f.read().splitlines())
    if runs <= fail_times:
        raise RuntimeError(f"run {runs} fails on purpose")
    return runs


@queues.job
def quick(i):
    return i
