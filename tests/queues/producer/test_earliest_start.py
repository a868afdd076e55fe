"""``delay=``, ``at=`` and a task's ``run_after`` are the earliest time a job may start, never a moment before.

The scheduled registry holds whole seconds and RQ's scheduler moves a job once its second has begun, so a job due
at 12.3 s scored 12 could start at 12.0: the producer rounds the time up to the next whole second
(queues/producer/api.py)."""

import datetime as dt
import math
import time

import pytest
from django.utils import timezone

import queues
from queues.keyspace import keys
from tests.jobs import sample
from tests.jobs import tasks as sample_tasks
from tests.support import wait_for


def score(connection, job_id, queue="default"):
    return connection.zscore(keys.scheduled_key(queue), job_id)


def fractional_time(seconds_ahead=3):
    """An aware time ``seconds_ahead`` from now with a large fraction of a second (rounding down loses most)."""
    at = timezone.now().replace(microsecond=900_000) + dt.timedelta(seconds=seconds_ahead)
    return at


def test_a_job_at_a_fraction_of_a_second_is_scheduled_at_the_next_whole_second(queue_redis):
    at = fractional_time()
    job = queues.enqueue("default", sample.add, 1, 2, at=at)
    assert score(queue_redis, job.id) == math.ceil(at.timestamp())


def test_a_delayed_job_is_scheduled_no_earlier_than_its_delay(queue_redis):
    before = time.time()
    job = queues.enqueue("default", sample.add, 1, 2, delay=1.5)
    assert score(queue_redis, job.id) >= before + 1.5


def test_a_job_with_its_own_id_or_a_unique_key_is_scheduled_no_earlier_than_its_time(queue_redis):
    at = fractional_time()
    own_id = queues.enqueue("default", sample.add, 1, 2, at=at, job_id="earliest-own-id")
    unique = queues.enqueue("default", sample.add, 3, 4, at=at, unique="earliest-unique")
    assert score(queue_redis, own_id.id) == math.ceil(at.timestamp())
    assert score(queue_redis, unique.id) == math.ceil(at.timestamp())


def test_jobs_enqueued_together_are_scheduled_no_earlier_than_their_time(queue_redis):
    at = fractional_time()
    jobs = queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)], at=at)
    assert [score(queue_redis, job.id) for job in jobs] == [math.ceil(at.timestamp())] * 2


def test_a_tasks_run_after_is_scheduled_no_earlier_than_its_time(queue_redis):
    run_after = fractional_time()
    result = sample_tasks.add.using(run_after=run_after).enqueue(1, 2)
    assert score(queue_redis, result.id) == math.ceil(run_after.timestamp())
    assert result.task.run_after == run_after  # the task keeps the time it was given


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_never_starts_a_job_before_its_time(start_worker):
    at = fractional_time(seconds_ahead=2)
    job = queues.enqueue("default", sample.add, 1, 2, at=at)
    start_worker("default")  # with RQ's scheduler, which moves the job when it is due
    started = wait_for(
        lambda: (lambda j: j.started_at if j is not None and j.get_status() == "finished" else None)(
            queues.fetch_job(job.id)
        ),
        timeout=30,
        message=f"job {job.id} finished",
    )
    assert started.replace(tzinfo=dt.UTC) >= at
