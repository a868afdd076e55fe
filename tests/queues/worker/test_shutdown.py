"""Graceful shutdown with real worker processes and real signals: SIGTERM/SIGINT let the running
job finish (or, after the grace period or a second signal, put it back in its queue), take no new
job, and exit 0."""

import os
import signal

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from tests.jobs.resilience import ends, starts
from tests.support import wait_for
from tests.support.clock import past_rqs_repeat_window
from tests.support.worker import assert_back_at_head_of_queue

# once: Redis and worker processes only, CI's SQLite pass (pytest.ini)
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.once]

JOB = "tests.jobs.resilience.logged_sleep"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def wait_started(log, count=1):
    return wait_for(lambda: len(starts(log)) >= count and starts(log), timeout=60, message=f"{count} start(s) in {log}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_lets_the_running_job_finish_takes_no_new_job_and_exits_0(start_worker, queue_redis, tmp_path, sig):
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default")
    running = queues.enqueue("default", JOB, str(log), first_run_seconds=3)
    wait_started(log)
    waiting = queues.enqueue("default", JOB, str(tmp_path / "other.jsonl"))

    worker.signal(sig)

    assert worker.wait(60) == 0, worker.output()
    assert fetch(running.id, queue_redis).get_status() == JobStatus.FINISHED
    assert fetch(running.id, queue_redis).return_value() == "done"
    assert len(ends(log)) == 1
    assert fetch(waiting.id, queue_redis).get_status() == JobStatus.QUEUED
    assert get_queue("default").get_job_ids() == [waiting.id]
    assert starts(tmp_path / "other.jsonl") == []


def test_idle_worker_exits_0_on_sigterm_and_unregisters(start_worker, queue_redis):
    from rq.worker import Worker

    worker = start_worker("default", "orders-sync")
    wait_for(lambda: Worker.all(connection=queue_redis), message="the worker to register")
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0, worker.output()
    assert Worker.all(connection=queue_redis) == []


def test_job_still_running_when_the_grace_period_ends_goes_back_to_its_queue(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default", "--grace", "2")
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600)
    first_run = wait_started(log)[0]

    worker.signal(signal.SIGTERM)

    assert worker.wait(60) == 0, worker.output()
    job = assert_back_at_head_of_queue(job, queue_redis)
    assert "grace period of 2 s" in job.meta["last_interruption"]
    assert ends(log) == []
    assert not os.path.exists(f"/proc/{first_run['pid']}")  # the work horse was stopped

    start_worker("default")
    wait_for(lambda: ends(log), timeout=60, message="the returned job to run again")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the worker to record the job as finished",
    )  # it logs before the worker records
    assert [(r["attempt"], r["interruptions"]) for r in starts(log)] == [(1, 0), (1, 1)]


def test_second_stop_signal_stops_the_job_at_once_and_returns_it_to_its_queue(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default", "--grace", "600")
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600)
    wait_started(log)

    worker.signal(signal.SIGTERM)
    wait_for(lambda: "taking no new job" in worker.output(), message="the first signal to be handled")
    past_rqs_repeat_window()  # a repeat within 1 s of the first is the same stop, delivered twice
    worker.signal(signal.SIGINT)

    assert worker.wait(60) == 0, worker.output()
    job = assert_back_at_head_of_queue(job, queue_redis)
    assert "second stop signal" in job.meta["last_interruption"]

    start_worker("default")
    wait_for(lambda: ends(log), timeout=60, message="the returned job to run again")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the worker to record the job as finished",
    )  # it logs before the worker records


def test_work_horse_ignores_a_sigterm_sent_to_every_process_of_the_worker(start_worker, queue_redis, tmp_path):
    """What systemd's default KillMode=control-group (or Heroku) does: SIGTERM to all processes."""
    log = tmp_path / "runs.jsonl"
    worker = start_worker("default")
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=3)
    horse_pid = wait_started(log)[0]["pid"]

    os.kill(horse_pid, signal.SIGTERM)
    worker.signal(signal.SIGTERM)

    assert worker.wait(60) == 0, worker.output()
    assert fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED
    assert len(ends(log)) == 1


def test_worker_whose_queues_are_all_paused_still_stops_on_sigterm(start_worker, queue_redis):
    from rq.worker import Worker

    from queues.worker.pause import pause

    pause("default")
    worker = start_worker("default")
    wait_for(lambda: "paused queues left alone" in worker.output(), message="the worker to see the pause")
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0, worker.output()
    assert Worker.all(connection=queue_redis) == []
