"""Job modules of the tests (QUEUE_JOB_MODULES=tests.jobs): module-level functions real workers import.

A ``time.sleep`` in a job is the job's work (a job that lasts, for a timeout, a grace period or a kill to land
in), never a test's wait; a job that waits for the test waits for a condition with ``hold_until``."""

import time


def hold_until(predicate, wait_seconds, timeout_message=None):
    """In a job: poll ``predicate`` until it holds. Past ``wait_seconds``, raise TimeoutError(``timeout_message``),
    or return quietly when there is none."""
    deadline = time.monotonic() + wait_seconds
    while not predicate():
        if time.monotonic() > deadline:
            if timeout_message is None:
                return
            raise TimeoutError(timeout_message)
        time.sleep(0.02)  # the poll interval of a condition wait
