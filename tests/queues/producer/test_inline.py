"""``queues.testing.inline()``: an enqueue runs the job at once in the caller's thread, writes nothing to Redis."""

import pytest

import queues
from queues.testing import inline, inline_result
from tests.jobs import current, sample

DOWN = "redis://127.0.0.1:1/0"  # port 1: refused at once; an inline enqueue never asks it


@pytest.fixture
def redis_down(settings):
    settings.QUEUES_REDIS_URL = DOWN


def prefix_keys(admin_redis):
    from tests.session_env import PREFIX

    return sorted(admin_redis.scan_iter(match=f"{PREFIX}:*"))


def test_an_enqueue_inside_inline_runs_the_job_and_writes_nothing(admin_redis, redis_down):
    with inline():
        job = queues.enqueue("default", sample.add, 2, 3)
    assert inline_result(job) == 5
    assert job.get_status(refresh=False) == "finished"
    assert prefix_keys(admin_redis) == []


@pytest.mark.django_db
def test_inline_runs_inside_a_transaction_too(redis_down):
    from django.db import transaction

    with inline(), transaction.atomic():
        job = queues.enqueue_call("default", sample.add, args=[1, 1], durable=True)
    assert inline_result(job) == 2


def test_the_job_sees_itself_as_the_current_job(redis_down):
    with inline():
        job = queues.enqueue("default", current.report_itself)
    assert inline_result(job) == {
        "id": job.id,
        "queue": "default",
        "attempt": 1,
        "progress": {"percent": 75, "step": 3, "steps": 4},
        "meta_writable": False,
    }
    assert queues.current_job() is None  # after the job: outside it again


def test_the_jobs_exception_reaches_the_caller(redis_down):
    with inline(), pytest.raises(RuntimeError, match="inline boom"):
        queues.enqueue("default", sample.fail, "inline boom")


def test_a_bad_enqueue_is_refused_as_ever(redis_down):
    with inline(), pytest.raises(queues.InvalidJob):
        queues.enqueue("default", sample.add, object(), 1)


def test_enqueue_many_runs_every_job(redis_down):
    with inline():
        jobs = queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)])
    assert [inline_result(job) for job in jobs] == [3, 7]


@inline()
def test_inline_decorates_a_test_function(redis_down):
    assert inline_result(queues.enqueue("default", sample.add, 4, 4, delay=3600)) == 8  # a delay runs at once


def test_outside_inline_the_job_goes_to_redis(queue_redis):
    job = queues.enqueue("default", sample.add, 2, 3)
    assert job.id in queues.get_queue("default", connection=queue_redis).job_ids
    assert inline_result(job) is None


def test_a_task_enqueued_inside_inline_runs_at_its_enqueue(redis_down, tmp_path):
    from tests.jobs import tasks

    log = tmp_path / "ran.txt"
    with inline():
        result = tasks.record.enqueue(str(log), "inline")
    assert log.read_text() == "inline\n"
    assert result.id
