"""Redis outages of up to 30 s, on a private redis-server that the tests stop and start while real
workers and schedulers run (never the session's Redis). Nothing may need a manual restart, and a
job that succeeded during an outage may run again but is never failed or dead-lettered for it."""

import time

import pytest
from rq.registry import FailedJobRegistry
from rq.worker import Worker

import queues
from queues.catalog.lookup import OptimaJob
from tests.jobs.resilience import ends, runs, starts
from tests.support import wait_for
from tests.support.clock import hold_outage
from tests.support.outages import OUTAGE_SECONDS, finished

# marker once: what is tested is Redis going away under real processes; the database only keeps their dead
# letters, so CI's PostgreSQL pass leaves these out (3 x 30 s outages: ~2 min of CI).
pytestmark = [pytest.mark.slow, pytest.mark.once, pytest.mark.django_db(transaction=True)]

JOB = "tests.jobs.resilience.logged_sleep"


def fetch(job_id, client):
    return OptimaJob.fetch(job_id, connection=client)


def run_a_new_job(client, log, **options):
    job = queues.enqueue("default", JOB, str(log), **options)
    wait_for(lambda: finished(job.id, client), timeout=60, message=f"new job {job.id} to finish")
    return job


def test_idle_worker_and_its_scheduler_carry_on_after_redis_was_refused_for_30_s_and_came_back_empty(
    outage_redis, start_worker, tmp_path
):
    server, client = outage_redis(durable=False)
    worker = start_worker("default", env={"REDIS_URL": server.url})
    run_a_new_job(client, tmp_path / "before.jsonl")

    server.stop()
    hold_outage(time.monotonic(), OUTAGE_SECONDS)
    server.start()

    run_a_new_job(client, tmp_path / "after.jsonl")
    run_a_new_job(client, tmp_path / "delayed.jsonl", delay=1)  # needs RQ's scheduler process
    assert worker.process.poll() is None, worker.output()
    # The server lost its data: the worker registered itself again.
    wait_for(lambda: len(Worker.all(connection=client)) == 1, timeout=60, message="the worker to re-register")
    assert "Redis is back after" in worker.output()


def test_job_that_succeeds_while_redis_is_down_for_30_s_is_recorded_once_it_is_back(
    outage_redis, start_worker, tmp_path
):
    from queues.models import DeadLetter

    server, client = outage_redis(durable=True)
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default", env={"REDIS_URL": server.url})
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=3, attempts=1)
    wait_for(lambda: starts(log), timeout=60, message="the job to start")

    server.stop()
    wait_for(lambda: ends(log), timeout=60, message="the job to return during the outage")
    hold_outage(time.monotonic(), OUTAGE_SECONDS)  # 30 s more, after its return
    server.start()

    wait_for(lambda: finished(job.id, client), timeout=90, message="the success to be recorded")
    assert fetch(job.id, client).return_value() == "done"
    assert FailedJobRegistry("default", connection=client).get_job_ids() == []
    assert DeadLetter.objects.filter(job_id=job.id).count() == 0
    run_a_new_job(client, tmp_path / "after.jsonl")
    assert worker.process.poll() is None, worker.output()


def test_job_that_fails_while_redis_is_down_is_retried_by_its_policy_once_redis_is_back(
    outage_redis, start_worker, tmp_path
):
    """The failure is recorded when Redis returns (not lost, not turned into an outage artefact):
    attempt 2 follows after the backoff, and nothing reaches the dead letter."""
    from queues.models import DeadLetter

    server, client = outage_redis(durable=True)
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default", env={"REDIS_URL": server.url})
    job = queues.enqueue(
        "default", "tests.jobs.resilience.fail_on_first_run", str(log), first_run_seconds=2, attempts=2
    )
    wait_for(lambda: starts(log), timeout=60, message="the job to start")

    server.stop()
    wait_for(
        lambda: any(r["event"] == "fail" for r in runs(log)),
        timeout=60,
        message="the first run to fail during the outage",
    )
    # Redis stays away until the work horse has tried to record the failure and found Redis gone.
    wait_for(
        lambda: any(
            "Redis is unavailable" in line and f"record the failure of job {job.id}" in line
            for line in worker.output().splitlines()
        ),
        timeout=60,
        message="the work horse to try to record the failure during the outage",
    )
    server.start()

    wait_for(lambda: finished(job.id, client), timeout=90, message="attempt 2 to succeed")
    assert [r["attempt"] for r in starts(log)] == [1, 2]
    assert FailedJobRegistry("default", connection=client).get_job_ids() == []
    assert DeadLetter.objects.count() == 0
    assert worker.process.poll() is None, worker.output()


def test_rqscheduler_carries_on_after_redis_was_refused_for_30_s(outage_redis, start_worker, tmp_path):
    from queues.periodic.schedules import scheduled_jobs_key
    from tests.support.lifecycle import WORKER_ENV

    server, client = outage_redis(durable=False)
    env = dict(WORKER_ENV, REDIS_URL=server.url)  # declares the periodic job "tick" (hourly) on "lifecycle"
    start_worker("lifecycle", "--without-scheduler", env=env)
    scheduler_process = start_worker("--interval", "1", env=env, command="rqscheduler")
    wait_for(
        lambda: "Periodic jobs:" in scheduler_process.output() or scheduler_process.process.poll() is not None,
        timeout=60,
        message="rqscheduler to start",
    )

    server.stop()
    hold_outage(time.monotonic(), OUTAGE_SECONDS)
    server.start()

    due = int(time.time())
    client.zadd(scheduled_jobs_key(), {"schedule-tick": due})  # due now: the next poll enqueues a run
    run_id = f"schedule-tick-{due}"
    wait_for(lambda: finished(run_id, client), timeout=60, message="the periodic job's run to finish")
    assert scheduler_process.process.poll() is None, scheduler_process.output()


def test_a_server_stopped_mid_run_stops_only_its_own_queues_and_nothing_is_lost_on_either(
    second_redis, server_b_env, start_worker, queue_redis, tmp_path
):
    """Issue 36: two redis-servers, a worker on each; server b stops while its worker runs a job and others wait,
    stays away 10 s and comes back. The default server's jobs run on meanwhile; every job of b, the running one,
    the waiting ones and one accepted into the outbox while b was down, finishes once b is back."""
    import redis  # the test's own client of b

    log = tmp_path / "b.jsonl"
    worker_a = start_worker("default")
    worker_b = start_worker("--server", "b", env=server_b_env)
    b_client = redis.Redis.from_url(second_redis.url)
    b_running = queues.enqueue("on-b", JOB, str(log), first_run_seconds=3, attempts=1)
    b_waiting = [queues.enqueue("on-b", "tests.jobs.sample.add", i, 1) for i in range(3)]
    wait_for(lambda: starts(log), timeout=60, message="b's first job to start")

    second_redis.stop()
    since = time.monotonic()
    a_jobs = [queues.enqueue("default", "tests.jobs.sample.add", i, 2) for i in range(3)]
    b_outbox = queues.enqueue("on-b", "tests.jobs.sample.add", 100, 1, durable=True)  # accepted, b is down
    wait_for(lambda: all(finished(j.id, queue_redis) for j in a_jobs), timeout=60, message="a's jobs during b's outage")
    assert not finished(b_outbox.id, b_client)
    hold_outage(since, 10)
    second_redis.start()

    b_jobs = [b_running, *b_waiting, b_outbox]
    wait_for(lambda: all(finished(j.id, b_client) for j in b_jobs), timeout=120, message="every job of b")
    assert [fetch(j.id, b_client).return_value() for j in b_jobs] == ["done", 1, 2, 3, 101]
    assert [fetch(j.id, queue_redis).return_value() for j in a_jobs] == [2, 3, 4]
    assert FailedJobRegistry("on-b", connection=b_client).get_job_ids() == []
    assert FailedJobRegistry("default", connection=queue_redis).get_job_ids() == []
    assert worker_a.process.poll() is None, worker_a.output()
    assert worker_b.process.poll() is None, worker_b.output()
