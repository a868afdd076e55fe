"""Rate limits per key through a real worker (issue 35, §2): the issue's measured window.

The jobs are no-ops run by one thread-pool worker (no fork per job): the rate is kept by the key's budget in
Redis (queues/producer/rates.py, released on the RQ scheduler's timer), not by how fast the worker is, so a
loaded machine stretches the window only by the latency of the last release."""

import time

import pytest
from rq.job import JobStatus
from rq.scheduler import RQScheduler

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import meta as jobmeta
from queues.keyspace import keys
from queues.models import AuditEntry
from queues.operator import actions
from queues.producer import limits, rates
from tests.support import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

NOOP = "tests.jobs.sample.add"


def fetched(jobs, connection):
    return [OptimaJob.fetch(job.id, connection=connection) for job in jobs]


def all_finished(jobs, connection):
    return all(job.get_status() == JobStatus.FINISHED for job in fetched(jobs, connection))


def waited(predicate, worker, message, timeout=60):
    """``wait_for``, failing with where the jobs are and the worker's log (its RQ scheduler releases them)."""
    try:
        wait_for(predicate, timeout=timeout, interval=0.2, message=message)
    except pytest.fail.Exception as exc:
        connection = get_queue("default").connection
        where = {
            "queued": connection.llen(get_queue("default").key),
            "held": {k: connection.zcard(rates.held_key(f"default:{k}")) for k in ("seller:slow", "seller:fast")},
            "due": connection.zrange(rates.due_key(), 0, -1, withscores=True),
            "redis time": connection.time(),
        }
        pytest.fail(f"{exc}; {where}; the worker's log:\n{worker.output()[-6000:]}")


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_key_at_5_per_second_starts_100_jobs_in_19_to_21_seconds_while_another_key_runs_at_once(
    start_worker, queue_redis
):
    worker = start_worker("default", "--concurrency", "8")
    probe = queues.enqueue("default", NOOP, 0, 0)
    wait_for(lambda: all_finished([probe], queue_redis), timeout=60, message="the worker to start")
    lock = RQScheduler.get_locking_key("default")
    wait_for(lambda: queue_redis.exists(lock), timeout=60, message="the worker's RQ scheduler to start")

    slow = [queues.enqueue("default", NOOP, i, 0, limit_key="seller:slow", limit_rate="5/s") for i in range(100)]
    held = OptimaJob.fetch(slow[-1].id, connection=queue_redis)
    assert held.get_status() == JobStatus.RATE_LIMITED  # beyond the budget: held, not queued

    enqueued_fast_at = time.time()
    fast = [queues.enqueue("default", NOOP, i, 1, limit_key="seller:fast", limit_rate="50/s") for i in range(20)]
    waited(lambda: all_finished(fast, queue_redis), worker, "the other key's 20 jobs to finish")
    fast_done = max(job.ended_at.timestamp() for job in fetched(fast, queue_redis))
    assert fast_done - enqueued_fast_at <= 3.0, f"the other key: {fast_done - enqueued_fast_at:.2f} s"

    waited(lambda: all_finished(slow, queue_redis), worker, "the 100 jobs to finish", timeout=120)
    runs = fetched(slow, queue_redis)
    starts = sorted(job.started_at.timestamp() for job in runs)
    assert 19.0 <= starts[-1] - starts[0] <= 21.0, f"first start to last: {starts[-1] - starts[0]:.2f} s"
    assert [job.return_value() for job in runs] == list(range(100))
    assert {jobmeta.current_attempt(job) for job in runs} == {1}  # held is no attempt spent
    assert worker.stop() == 0, worker.output()


def test_a_paused_concurrency_key_keeps_its_jobs_held_through_a_freed_slot_while_its_queue_runs_and_resumes(
    start_worker, queue_redis, tmp_path
):
    worker = start_worker("default", "--concurrency", "4")
    release = tmp_path / "go"
    cabinet = {"limit_key": "cabinet:1", "limit_concurrency": 1}
    running = queues.enqueue(
        "default", "tests.jobs.resilience.wait_for_file_then_return", str(tmp_path / "log"), str(release), **cabinet
    )
    held = [queues.enqueue("default", NOOP, i, 0, **cabinet) for i in range(2)]
    wait_for(
        lambda: fetched([running], queue_redis)[0].get_status() == JobStatus.STARTED, timeout=60, message="a start"
    )
    assert actions.one("ops", "pause_key", "default:cabinet:1").ok

    others = [queues.enqueue("default", NOOP, i, 0, limit_key="cabinet:2", limit_concurrency=1) for i in range(2)]
    others.append(queues.enqueue("default", NOOP, 2, 2))
    waited(lambda: all_finished(others, queue_redis), worker, "the queue's other jobs to run")
    release.touch()
    allowed = keys.limit_allowed_key(limits.scoped("default", "cabinet:1"))
    # rq's worker frees the slot and runs its promotion in one script: after it, nothing of the key is queued
    waited(lambda: all_finished([running], queue_redis) and queue_redis.zcard(allowed) == 0, worker, "the slot")
    assert [job.get_status() for job in fetched(held, queue_redis)] == [JobStatus.RATE_LIMITED] * 2
    assert get_queue("default").job_ids == []

    assert actions.one("ops", "resume_key", "default:cabinet:1").ok
    waited(lambda: all_finished(held, queue_redis), worker, "the held jobs to run after the resume")
    assert list(AuditEntry.objects.order_by("pk").values_list("identity", "action", "queue", "outcome")) == [
        ("ops", "pause_key", "default", "ok"),
        ("ops", "resume_key", "default", "ok"),
    ]
    assert worker.stop() == 0, worker.output()
