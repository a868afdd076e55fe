"""Every way a job with a rate comes back is charged by its rate (queues/producer/rates.py): a retry with no
delay (queues/failures/retry.py), one after its backoff (the RQ scheduler's move), and a requeue of the dead
job (queues/failures/operations.py, the operator's chunked requeue and "Requeue All"). With a "1/hour" budget
spent by the job's first start, it comes back *held*: no attempt spent, waiting for its key's next token.
Real workers, real Redis."""

import pytest
from rq.registry import FailedJobRegistry

import queues
from queues.catalog.lookup import fetch_job, get_queue
from queues.failures import operations
from queues.operator import jobs as operator_jobs
from queues.operator import queues_wide
from queues.producer import limits, rates
from tests.support import wait_for
from tests.support.lifecycle import wait_dead

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RATE = "1/hour"  # one start an hour, no tolerance: the job's first start spends the budget


def held(connection, limit_key, job_id):
    return connection.zscore(rates.held_key(limits.scoped("default", limit_key)), job_id) is not None


def wait_held(connection, limit_key, job, worker):
    try:
        wait_for(
            lambda: fetch_job(job.id).get_status() == "rate_limited" and held(connection, limit_key, job.id),
            timeout=60,
            message=f"job {job.id} held by its rate",
        )
    except pytest.fail.Exception as exc:
        state = queues.job_state(job.id)
        pytest.fail(f"{exc}; it is {state and state.state}; the worker's log:\n{worker.output()[-4000:]}")


@pytest.mark.parametrize("delay", [0, 1], ids=["no-delay", "after-its-backoff"])
def test_a_retry_of_a_job_with_a_rate_is_held_by_its_rate(delay, start_worker, queue_redis):
    key = f"seller:retry-{delay}"
    job = queues.enqueue("default", "tests.jobs.lifecycle.rate_limited", delay, limit_key=key, limit_rate=RATE)
    worker = start_worker("default")  # with RQ's scheduler: it moves the retry when its delay is over
    wait_held(queue_redis, key, job, worker)
    state = queues.job_state(job.id)
    assert (state.state, state.attempt) == ("held", 2)  # the retry waits for its key's next token
    assert get_queue("default").job_ids == []
    assert worker.stop() == 0, worker.output()


def test_a_requeued_dead_job_with_a_rate_is_held_by_its_rate_whichever_door_requeues_it(start_worker, queue_redis):
    keys = ["seller:rq-one", "seller:rq-chunk", "seller:rq-all"]
    dead = [
        queues.enqueue("default", "tests.jobs.lifecycle.fail", attempts=1, limit_key=k, limit_rate=RATE) for k in keys
    ]
    assert start_worker("default", "--burst", "--without-scheduler").wait(60) == 0
    for job in dead:
        wait_dead(queue_redis, "default", job.id)
    queue = get_queue("default")

    operations.requeue(queue, fetch_job(dead[0].id), in_failed=True)  # the panel's one job, a dead letter's retry
    [result], _failed = operator_jobs.run_many("requeue", queue, [dead[1].id])  # the panel's chunk of ids
    assert result.ok, result
    assert queues_wide.run("requeue_all", "default", queue).ok  # the queue's "Requeue All": the last one

    for key, job in zip(keys, dead):
        assert fetch_job(job.id).get_status() == "rate_limited", key
        assert held(queue_redis, key, job.id), key
        assert job.id not in FailedJobRegistry("default", connection=queue_redis)
    assert queue.job_ids == []  # none pushed past its rate


def test_a_finished_job_with_a_rate_enqueued_again_from_the_panel_is_held_by_its_rate(start_worker, queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.quick", 5, limit_key="seller:again", limit_rate=RATE)
    assert start_worker("default", "--burst", "--without-scheduler").wait(60) == 0
    assert fetch_job(job.id).get_status() == "finished"
    result = operator_jobs.run("enqueue", get_queue("default"), job.id)
    assert result.ok, result
    assert fetch_job(job.id).get_status() == "rate_limited"
    assert held(queue_redis, "seller:again", job.id)
    assert get_queue("default").job_ids == []
