"""Helpers shared by the lifecycle tests (retry, dead letters, retention, schedules)."""

from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from rq.scheduler import RQScheduler

from queues.catalog.lookup import OptimaJob
from tests.support import wait_for

WORKER_ENV = {"DJANGO_SETTINGS_MODULE": "tests.support.lifecycle_settings"}


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def scheduled_score(connection, name, job_id):
    return connection.zscore(ScheduledJobRegistry(name, connection=connection).key, job_id)


def wait_scheduled_for_attempt(connection, name, job_id, attempt, timeout=60):
    """Wait until the job sits in the ScheduledJobRegistry waiting for attempt ``attempt``; -> job."""

    def ready():
        if scheduled_score(connection, name, job_id) is None:
            return None
        job = fetch(job_id, connection)
        return job if job.meta.get("attempt") == attempt else None

    return wait_for(ready, timeout=timeout, message=f"job {job_id} scheduled for attempt {attempt}")


def release_now(connection, name, job_id):
    """Make a scheduled retry due and run RQ's own scheduler once (what a worker's scheduler does)."""
    connection.zadd(ScheduledJobRegistry(name, connection=connection).key, {job_id: 0})
    scheduler = RQScheduler([name], connection=connection)
    assert scheduler.acquire_locks() == {name}
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()


def wait_dead(connection, name, job_id, timeout=60):
    registry = FailedJobRegistry(name, connection=connection)
    wait_for(lambda: job_id in registry, timeout=timeout, message=f"job {job_id} in the failed registry")
    return fetch(job_id, connection)


def wait_row(job_id, timeout=60, **filters):
    from queues.models import DeadLetter

    return wait_for(
        lambda: DeadLetter.objects.filter(job_id=job_id, **filters).first(),
        timeout=timeout,
        message=f"a DeadLetter row for {job_id} {filters or ''}",
    )
