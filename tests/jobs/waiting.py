"""A job that holds a worker until the test lets it go (deterministic 'active' state)."""

import os

import queues
from tests.jobs import hold_until


@queues.job
def wait_for_file(path, wait_seconds=120):
    hold_until(lambda: os.path.exists(path), wait_seconds, f"{path} did not appear within {wait_seconds}s")
    return "released"
