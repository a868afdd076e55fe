"""Job functions of the operator-surface tests (module-level, importable by real workers)."""

import os

import queues
from tests.jobs import hold_until


@queues.job
def fail_until_exists(path):
    """Fails until ``path`` exists: a dead job that a retry after the "fix" completes."""
    if not os.path.exists(path):
        raise RuntimeError(f"upstream not ready: {path} is missing")
    return "fixed"


@queues.job
def report_progress_and_wait(path, step, of, wait_seconds=120):
    """Puts ``{"step": step, "of": of}`` in its meta, then runs until ``path`` exists: a started job
    with progress for the panel's pages."""

    from rq import get_current_job

    job = get_current_job()
    job.meta["progress"] = {"step": step, "of": of, "note": "<b>not bold</b>"}
    job.save_meta()
    hold_until(lambda: os.path.exists(path), wait_seconds, f"{path} did not appear within {wait_seconds}s")
    return "released"
