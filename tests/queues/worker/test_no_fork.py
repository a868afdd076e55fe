"""``rqworker --no-fork`` (OptimaSimpleWorker) with real processes, signals and Redis: the same
guarantees as the forking worker — attempts and dead letters, a re-run after SIGKILL, the SIGTERM
grace (past it the job goes back to the head of its queue and the process exits), and an outcome
recorded after a Redis outage."""

import signal
import time

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob
from queues.jobs import execution as execution_record
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.worker.abandoned import Scan
from tests.jobs.resilience import ends, runs, starts
from tests.support import wait_for
from tests.support.outages import finished
from tests.support.worker import (
    WITH_AND_WITHOUT_RQ_RECORDS,
    assert_back_at_head_of_queue,
    assert_jobs_popped_ahead_go_back,
    started_entries,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOB = "tests.jobs.resilience.logged_sleep"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def test_a_fork_free_worker_runs_jobs_in_its_own_process_and_dead_letters_the_last_failure(
    start_worker, queue_redis, tmp_path
):
    ok = queues.enqueue("default", "tests.jobs.sample.whoami")
    dead = queues.enqueue("default", "tests.jobs.sample.fail", "still broken", attempts=2)
    worker = start_worker("default", "--no-fork")
    wait_for(
        lambda: DeadLetter.objects.filter(job_id=dead.id).exists(),
        timeout=60,
        message="the job to use its 2 attempts and be dead-lettered",
    )
    assert fetch(ok.id, queue_redis).return_value() == worker.pid  # no horse: the worker ran it
    row = DeadLetter.objects.get(job_id=dead.id)
    assert (row.reason, row.attempts_made, row.exc_message) == ("exhausted", 2, "still broken")
    assert worker.stop() == 0, worker.output()


@WITH_AND_WITHOUT_RQ_RECORDS
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_job_of_a_killed_fork_free_worker_runs_again_on_another(start_worker, queue_redis, tmp_path, rq_records):
    """With or without rq's execution records (RQ_EXECUTION_RECORDS, queues/jobs/execution.py), a scan leaves the
    running job of a live worker alone and, once that worker is killed, another worker's scan finds it abandoned."""
    log, env = tmp_path / "runs.jsonl", {"QUEUE_RQ_EXECUTION_RECORDS": rq_records}
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=120, attempts=3)
    victim = start_worker("default", "--no-fork", env=env)
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    [entry] = started_entries(queue_redis)
    assert bool(queue_redis.exists(keys.execution_key(entry))) == (rq_records == "1")
    owner = fetch(job.id, queue_redis).worker_name
    assert execution_record.owners(queue_redis, [entry]) == [owner] and owner
    counts = Scan(queue_redis, ["default"], stale_after=10).run()  # a scan of any worker meanwhile
    assert counts["retried"] == counts["dead"] == 0  # the job's worker is alive and runs it
    assert started_entries(queue_redis) == [entry]
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    start_worker("default", "--no-fork", env=env)
    wait_for(lambda: ends(log), timeout=90, message="the job to run again on the other worker")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the re-run to be recorded",
    )
    assert [r["attempt"] for r in starts(log)] == [1, 2]  # the killed run used an attempt
    assert starts(log)[0]["pid"] == victim.pid


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_sigterm_lets_the_running_job_finish_within_the_grace_and_exits_0(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=3)
    worker = start_worker("default", "--no-fork", "--grace", "20")
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0, worker.output()
    assert fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_past_the_grace_the_job_goes_back_to_the_head_of_its_queue_and_the_worker_exits(
    start_worker, queue_redis, tmp_path
):
    log = tmp_path / "runs.jsonl"
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=120)
    worker = start_worker("default", "--no-fork", "--grace", "1")
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0, worker.output()
    assert time.monotonic() - started < 60
    assert_back_at_head_of_queue(job, queue_redis)
    assert [r["event"] for r in runs(log)] == ["start"]  # nothing was raised into the job's code
    assert "the shutdown grace period of 1 s ran out" in worker.output()


def test_a_success_while_redis_is_away_is_recorded_once_it_is_back(outage_redis, start_worker, tmp_path):
    server, client = outage_redis(durable=True)
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default", "--no-fork", env={"REDIS_URL": server.url})
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=3, attempts=1)
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    server.stop()
    wait_for(lambda: ends(log), timeout=60, message="the job to return during the outage")
    # Redis stays away until the worker has tried to record the success and failed (it retries until Redis is back).
    wait_for(
        lambda: any(
            "Redis is unavailable" in line and f"record the success of job {job.id}" in line
            for line in worker.output().splitlines()
        ),
        timeout=60,
        message="the worker to try to record the success during the outage",
    )
    server.start()
    wait_for(lambda: finished(job.id, client), timeout=90, message="the success to be recorded")
    assert fetch(job.id, client).return_value() == "done"
    assert DeadLetter.objects.filter(job_id=job.id).count() == 0
    assert worker.process.poll() is None, worker.output()


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_next_job_popped_with_a_success_goes_back_to_the_head_of_its_queue_when_the_worker_ends(
    start_worker, queue_redis
):
    """The fork-free worker sends its next pop with each success (``intake.Intake.pop_ahead``): a worker that ends
    after that success (``--max-jobs 1``) gives the job it popped back, to the head of its queue and untouched, where
    the next worker runs it; none is left in the intermediate list for the abandoned-job scan."""
    first, second, third = (queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in (1, 2, 3))
    queue = queues.get_queue("default")
    worker = start_worker("default", "--no-fork", "--max-jobs", "1")
    assert worker.wait(60) == 0, worker.output()
    assert fetch(first.id, queue_redis).get_status() == JobStatus.FINISHED
    assert queue.get_job_ids() == [second.id, third.id], "the job popped with the success is back at the head"
    assert queue_redis.llen(queue.key + ":intermediate") == 0
    assert fetch(second.id, queue_redis).get_status() == JobStatus.QUEUED
    start_worker("default", "--no-fork", "--burst").wait(60)
    assert [fetch(job.id, queue_redis).return_value() for job in (second, third)] == [3, 4]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_quick_jobs_popped_ahead_of_a_long_one_go_back_to_their_queue_while_it_runs(
    start_worker, queue_redis, tmp_path
):
    """While its jobs are quick, the fork-free worker's pop takes ``prefetch.FORK_FREE_AHEAD`` jobs, run one after
    the other. A long job among them holds the ones popped with it: after ``PREFETCH_HOLD_SECONDS`` its lifeline (the
    worker's only working thread is in the job) gives them back to the head of their queue, in their order, their
    start taken back and no attempt counted, and another worker runs them while the long one still runs. Each job
    runs once, at its first attempt."""
    assert_jobs_popped_ahead_go_back(start_worker, queue_redis, tmp_path, ("--no-fork",), holders=1, held=3)
