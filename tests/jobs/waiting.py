"""A job that holds a worker until the test lets it go (deterministic 'active' state)."""
import os
import time

import queues


@queues.job
def wait_for_file(path, timeout=120):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.05)
    return "released"
