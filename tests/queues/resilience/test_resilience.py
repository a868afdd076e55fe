"""At-least-once: jobs of workers killed with SIGKILL run again or reach the dead letter; nothing
popped is ever lost, for one queue or several (real workers, real signals, the session's Redis)."""

import os
import signal

import pytest
from rq.job import JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry
from rq.scheduler import RQScheduler
from rq.worker import Worker

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.keyspace import keys
from queues.keyspace.keys import alive_key
from tests.jobs.resilience import ends, starts
from tests.support import wait_for
from tests.support.worker import WITH_AND_WITHOUT_RQ_RECORDS, started_entries

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOB = "tests.jobs.resilience.logged_sleep"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def registered_workers(connection):
    return {w.name for w in Worker.all(connection=connection)}


def wait_started(log, count=1, timeout=60):
    return wait_for(
        lambda: len(starts(log)) >= count and starts(log), timeout=timeout, message=f"{count} start(s) in {log}"
    )


def process_gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@WITH_AND_WITHOUT_RQ_RECORDS
def test_job_of_a_worker_killed_with_sigkill_runs_again_on_another_worker(
    start_worker, queue_redis, tmp_path, rq_records
):
    """The forking worker, with or without rq's execution records (RQ_EXECUTION_RECORDS: queues/jobs/execution.py;
    its start names the job's worker before the horse writes the rest)."""
    log, env = tmp_path / "runs.jsonl", {"QUEUE_RQ_EXECUTION_RECORDS": rq_records}
    doomed = start_worker("default", env=env)
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600)
    first_run = wait_started(log)[0]
    [entry] = started_entries(queue_redis)
    assert bool(queue_redis.exists(keys.execution_key(entry))) == (rq_records == "1")
    survivor = start_worker("default", env=env)

    doomed.signal(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL

    wait_for(lambda: ends(log), timeout=60, message="the job's second run to end")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the worker to record the job as finished",
    )  # it logs before the worker records
    job = fetch(job.id, queue_redis)
    assert job.return_value() == "done"
    runs = starts(log)
    assert [r["attempt"] for r in runs] == [1, 2]
    assert runs[1]["pid"] != first_run["pid"]
    assert process_gone(first_run["pid"])  # the killed worker's work horse died with it
    from queues.models import DeadLetter

    assert DeadLetter.objects.filter(job_id=job.id).count() == 0
    assert survivor.process.poll() is None


def test_job_of_a_killed_worker_with_no_attempt_left_is_dead_lettered_and_mirrored(start_worker, queue_redis, tmp_path):
    from queues.models import DeadLetter

    log = tmp_path / "runs.jsonl"
    doomed = start_worker("default")
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600, attempts=1)
    wait_started(log)
    start_worker("default")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)

    row = wait_for(
        lambda: DeadLetter.objects.filter(job_id=job.id).first(),
        timeout=60,
        message="a DeadLetter row for the abandoned job",
    )
    assert row.reason == "abandoned"
    assert row.status == "open"
    assert row.attempts_made == 1
    assert row.attempts_allowed == 1
    assert row.func_path == JOB
    assert row.exc_type == "rq.exceptions.AbandonedJobError"
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    assert fetch(job.id, queue_redis).get_status() == JobStatus.FAILED
    assert StartedJobRegistry("default", connection=queue_redis).get_job_ids(cleanup=False) == []
    assert len(starts(log)) == 1


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_job_of_a_killed_multi_queue_worker_runs_again(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    doomed = start_worker("default", "orders-sync")
    job = queues.enqueue("orders-sync", JOB, str(log), first_run_seconds=600)
    wait_started(log)
    start_worker("default", "orders-sync")
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)

    wait_for(lambda: ends(log), timeout=60, message="the job's second run to end")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the worker to record the job as finished",
    )  # it logs before the worker records
    assert [r["attempt"] for r in starts(log)] == [1, 2]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_job_popped_by_a_worker_that_died_before_starting_it_still_runs(start_worker, queue_redis, tmp_path):
    """The state a SIGKILL between the pop and the started registry leaves: the job id in the
    queue's intermediate list only. (rq's BLPOP of several queues would leave it nowhere.)"""
    log = tmp_path / "runs.jsonl"
    job = queues.enqueue("orders-sync", JOB, str(log))
    queue = get_queue("orders-sync")
    assert queue_redis.lmove(queue.key, queue.intermediate_queue_key) == job.id.encode()
    assert queue_redis.llen(queue.key) == 0

    start_worker("default", "orders-sync")

    wait_for(lambda: ends(log), timeout=60, message="the stranded job to run")
    # The job's own log line comes before the worker records its success: wait for that too.
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the stranded job to be recorded as finished",
    )
    assert [r["attempt"] for r in starts(log)] == [1]
    assert queue_redis.llen(queue.intermediate_queue_key) == 0


def busy(connection, pid):
    """The worker of process ``pid`` has a job in hand (rq writes it into the worker's hash)."""
    return any(w.pid == pid and w.get_current_job_id() for w in Worker.all(connection=connection))


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_no_job_is_lost_when_multi_queue_workers_are_killed_again_and_again(start_worker, queue_redis, tmp_path):
    log = tmp_path / "flood.jsonl"
    total = 60
    jobs = [
        queues.enqueue(("default", "orders-sync")[n % 2], "tests.jobs.resilience.quick", str(log), n, attempts=10)
        for n in range(total)
    ]
    start_worker("default", "orders-sync")  # keeps going throughout

    def all_finished():
        return all(fetch(j.id, queue_redis).get_status() == JobStatus.FINISHED for j in jobs)

    for _ in range(6):
        victim = start_worker("orders-sync", "default")
        # Killed in the middle of a job, once its worker hash in Redis names one (or once the flood is over).
        wait_for(
            lambda victim=victim: busy(queue_redis, victim.pid) or all_finished(),
            timeout=60,
            interval=0.1,
            message="the victim to take a job",
        )
        victim.signal(signal.SIGKILL)
        victim.wait(10)

    wait_for(all_finished, timeout=120, interval=0.5, message="every job of the flood to finish")
    assert sorted({r["n"] for r in ends(log)}) == list(range(total))
    assert queue_redis.llen(get_queue("default").intermediate_queue_key) == 0
    assert queue_redis.llen(get_queue("orders-sync").intermediate_queue_key) == 0


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_killed_worker_leaves_the_worker_registry_and_its_scheduler_is_replaced(start_worker, queue_redis, tmp_path):
    first = start_worker("default")
    wait_for(lambda: len(registered_workers(queue_redis)) == 1, message="the first worker to register")
    (doomed_name,) = registered_workers(queue_redis)
    lock_key = RQScheduler.get_locking_key("default")
    wait_for(lambda: queue_redis.get(lock_key), message="the first worker's scheduler to take its lock")
    doomed_lock = queue_redis.get(lock_key)
    start_worker("default")
    wait_for(lambda: len(registered_workers(queue_redis)) == 2, message="the second worker to register")

    first.signal(signal.SIGKILL)
    first.wait(10)

    wait_for(
        lambda: doomed_name not in registered_workers(queue_redis),
        timeout=60,
        message="the killed worker to leave the registry",
    )
    assert queue_redis.exists(alive_key(doomed_name)) == 0
    wait_for(
        lambda: queue_redis.get(lock_key) not in (None, doomed_lock),
        timeout=60,
        message="another worker's scheduler to take the lock",
    )
    log = tmp_path / "runs.jsonl"
    job = queues.enqueue("default", JOB, str(log), delay=1)
    wait_for(lambda: ends(log), timeout=60, message="a delayed job to run after the takeover")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the worker to record the job as finished",
    )  # it logs before the worker records


def test_resilience_options_out_of_range_are_reported_by_the_system_checks(settings):
    from django.core.checks import Error, run_checks

    settings.OPTIMA_QUEUES_OPTIONS = {"SHUTDOWN_GRACE_SECONDS": -1}
    assert run_checks() == [
        Error(
            "OPTIMA_QUEUES_OPTIONS['SHUTDOWN_GRACE_SECONDS'] must be a number of seconds >= 0, got -1.",
            hint="Remove it to use the default (25); docs/settings.md explains it.",
            id="queues.E060",
        )
    ]
    settings.OPTIMA_QUEUES_OPTIONS = {"LIVENESS_TTL_SECONDS": 3, "LIVENESS_INTERVAL_SECONDS": 2}
    assert [e.id for e in run_checks()] == ["queues.E061"]
    settings.OPTIMA_QUEUES_OPTIONS = {"RQ_EXECUTION_RECORDS": "0"}
    assert run_checks() == [
        Error(
            "OPTIMA_QUEUES_OPTIONS['RQ_EXECUTION_RECORDS'] must be True or False, got '0'.",
            hint="True while workers of a release up to 6f24d7d may run on the same Redis and prefix, "
            "False (the default) once none does (docs/settings.md).",
            id="queues.E062",
        )
    ]
    settings.OPTIMA_QUEUES_OPTIONS = {
        "SHUTDOWN_GRACE_SECONDS": 0,
        "LIVENESS_TTL_SECONDS": 4,
        "RQ_EXECUTION_RECORDS": False,
    }
    assert run_checks() == []


def test_a_worker_refuses_to_start_with_the_checks_message(start_worker, tmp_path):
    settings_module = tmp_path / "bad_resilience_settings.py"
    settings_module.write_text(
        "from optima_site.settings import *  # noqa\nOPTIMA_QUEUES_OPTIONS = {'DEQUEUE_WAIT_SECONDS': 0}\n"
    )
    worker = start_worker(
        "default", env={"DJANGO_SETTINGS_MODULE": "bad_resilience_settings", "PYTHONPATH": str(tmp_path)}
    )
    assert worker.wait(60) != 0
    assert (
        "OPTIMA_QUEUES_OPTIONS['DEQUEUE_WAIT_SECONDS'] must be a whole number of seconds >= 1, got 0."
        in worker.output()
    )
