"""``queues.current_job()``: the running job's id, queue, attempt, read-only meta and ``set_progress``, in every
way a job runs (forking worker, --no-fork, --concurrency threads, the pool, a ``@task``), and None outside a job."""

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.classes import OptimaJob
from tests.jobs import current
from tests.support import wait_for
from tests.support.lifecycle import release_now, wait_scheduled_for_attempt
from tests.support.worker import run_burst


def finished(connection, job_id):
    job = OptimaJob.fetch(job_id, connection=connection)
    return job if job.get_status() == JobStatus.FINISHED else None


def expected(job_id, attempt=1):
    return {
        "id": job_id,
        "queue": "default",
        "attempt": attempt,
        "progress": {"percent": 75, "step": 3, "steps": 4},
        "meta_writable": False,
    }


def test_outside_a_job_current_job_is_none():
    assert queues.current_job() is None
    assert current.report_itself() is None  # the function called directly, as a unit test does


def test_in_a_job_it_tells_id_queue_attempt_and_the_progress_it_set(queue_redis):
    job = queues.enqueue("default", current.report_itself)
    run_burst(queue_redis)
    done = finished(queue_redis, job.id)
    assert done.return_value() == expected(job.id)
    assert queues.job_state(job.id).progress == {"percent": 75, "step": 3, "steps": 4}


def test_a_retry_sees_its_second_attempt(queue_redis):
    job = queues.enqueue("default", current.report_itself, fail_until=2)
    run_burst(queue_redis)
    wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    release_now(queue_redis, "default", job.id)
    run_burst(queue_redis)
    assert finished(queue_redis, job.id).return_value() == expected(job.id, attempt=2)


def test_a_task_sees_its_job(queue_redis):
    result = current.report_itself_task.enqueue()
    run_burst(queue_redis)
    assert current.report_itself_task.get_result(result.id).return_value == expected(result.id)


@pytest.mark.slow
@pytest.mark.parametrize(
    "command,args",
    [
        ("rqworker", ("--burst",)),
        ("rqworker", ("--burst", "--no-fork")),
        ("rqworker", ("--concurrency", "2")),
        ("rqworker-pool", ("--num-workers", "2")),
    ],
    ids=["fork", "no-fork", "threads", "pool"],
)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_every_kind_of_worker_gives_the_job_its_current_job(start_worker, queue_redis, command, args):
    jobs = [queues.enqueue("default", current.report_itself) for _ in range(2)]
    start_worker("default", *args, command=command)
    for job in jobs:
        done = wait_for(lambda job=job: finished(queue_redis, job.id), timeout=60, message=f"job {job.id} finished")
        assert done.return_value() == expected(job.id)


@pytest.mark.parametrize("done,total", [(1, 0), (-1, 4), ("1", 4), (1, float("nan")), (True, 4)])
def test_set_progress_refuses_numbers_out_of_bounds(done, total):
    from queues.jobs import meta as jobmeta

    meta = {}
    with pytest.raises(ValueError, match="set_progress"):
        jobmeta.set_progress(meta, done, total)
    assert meta == {}
