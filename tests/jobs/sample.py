"""Job functions the tests enqueue (module-level, importable by real workers)."""

import os

import queues
from tests.jobs import work


@queues.job
def add(a, b):
    return a + b


@queues.job
def fail(message="boom"):
    raise RuntimeError(message)


@queues.job
def sleep_then_return(seconds, value=None):
    work(seconds)
    return value


@queues.job
def touch(path, content="done"):
    with open(path, "a") as f:
        f.write(content + "\n")
    return content


@queues.job
def whoami():
    return os.getpid()
