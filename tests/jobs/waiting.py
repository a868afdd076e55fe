"""A job that holds a worker until the test lets it go (deterministic 'active' state)."""

import os
import time

import queues


@queues.job
def wait_for_file(path, wait_seconds=120):
    deadline = time.monotonic() + wait_seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {wait_seconds}s")
        time.sleep(0.05)
    return "released"
