"""Job functions the tests enqueue (module-level, importable by real workers)."""
import os
import time


def add(a, b):
    return a + b


def fail(message="boom"):
    raise RuntimeError(message)


def sleep_then_return(seconds, value=None):
    time.sleep(seconds)
    return value


def touch(path, content="done"):
    with open(path, "a") as f:
        f.write(content + "\n")
    return content


def whoami():
    return os.getpid()
