"""Job modules of the tests (QUEUE_JOB_MODULES=tests.jobs): module-level functions real workers import.

A job that lasts (for a timeout, a grace period or a kill to land in) calls ``work(seconds)``, the one sleep of
the job modules; a job that waits for the test waits for a condition with ``hold_until``."""

import time

from tests.support import poll


def work(seconds):
    """The job's work: a run that lasts ``seconds`` (one ``time.sleep``, a C call: an exception raised into the
    job's thread waits for its end)."""
    time.sleep(seconds)  # the job's work: what it does is last ``seconds``, so a time and not a condition


def hold_until(predicate, wait_seconds, timeout_message=None):
    """In a job: poll ``predicate`` until it holds. Past ``wait_seconds``, raise TimeoutError(``timeout_message``),
    or return quietly when there is none."""
    if not poll(predicate, wait_seconds, interval=0.02) and timeout_message is not None:
        raise TimeoutError(timeout_message)
