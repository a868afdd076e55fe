"""Jobs of tests/queues/jobs/test_current.py: what ``queues.current_job()`` tells a running job."""

from django_tasks import task

import queues


def _report(fail_until):
    job = queues.current_job()
    if job is None:
        return None
    job.set_progress(3, 4)
    try:
        job.meta["progress"] = "overwritten"
        writable = True
    except TypeError:
        writable = False
    if job.attempt < fail_until:
        raise ValueError(f"attempt {job.attempt} fails on purpose")
    return {
        "id": job.id,
        "queue": job.queue,
        "attempt": job.attempt,
        "progress": job.meta["progress"],
        "meta_writable": writable,
    }


@queues.job
def report_itself(fail_until=1):
    """The running job as ``queues.current_job()`` sees it, after ``set_progress(3, 4)``; attempts before
    ``fail_until`` fail."""
    return _report(fail_until)


@task
def report_itself_task():
    return _report(1)
