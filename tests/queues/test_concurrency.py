"""``rqworker --concurrency N`` (queues.worker.OptimaConcurrentWorker) with real processes, real signals
and the session's Redis: N jobs really run at once in one process, and every guarantee holds per job
(at least once after SIGKILL, the SIGTERM grace, the timeout, retries and dead letters, stop, limit
keys, database connections, rqworker-pool)."""
import signal
import subprocess
import sys

import pytest
from django.core.management import CommandError, call_command
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob
from queues.models import DeadLetter
from tests.conftest import ROOT, wait_for
from tests.jobs.concurrent import records

pytestmark = [pytest.mark.django_db(transaction=True)]

TOGETHER = "tests.jobs.concurrent.together"
HOLD = "tests.jobs.concurrent.hold"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def finished(jobs, connection):
    return all(fetch(job.id, connection).get_status() == JobStatus.FINISHED for job in jobs)


def started(log, count):
    return wait_for(lambda: len(records(log, "start")) >= count and records(log, "start"), timeout=60,
                    message=f"{count} job(s) to start")


def test_eight_jobs_run_at_once_in_one_process_with_concurrency_8(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [queues.enqueue("default", TOGETHER, str(log), 8, attempts=1) for _ in range(8)]
    worker = start_worker("default", "--concurrency", "8")
    wait_for(lambda: finished(jobs, queue_redis), timeout=60, message="the 8 jobs to finish")
    starts = records(log, "start")
    assert {r["pid"] for r in starts} == {worker.pid}  # no horse: the worker's own process
    assert len({r["thread"] for r in starts}) == 8
    assert len(records(log, "end")) == 8
    assert worker.stop() == 0, worker.output()


def test_async_jobs_run_at_once_each_with_its_own_event_loop(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [queues.enqueue("default", "tests.jobs.concurrent.together_async", str(log), 4, attempts=1)
            for _ in range(4)]
    worker = start_worker("default", "--concurrency", "4")
    wait_for(lambda: finished(jobs, queue_redis), timeout=60, message="the 4 async jobs to finish")
    assert [fetch(job.id, queue_redis).return_value() for job in jobs] == ["async done"] * 4
    assert worker.stop() == 0, worker.output()


def run_command(*args, env):
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("value", ["0", "-3", "2.5"])
def test_a_bad_concurrency_is_refused_naming_the_option_the_value_and_an_example(value):
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--concurrency", value)
    assert str(refused.value) == (
        f"--concurrency must be a whole number of jobs >= 1, got {value!r}. Example: --concurrency 8 "
        "(8 jobs at once in one process; 1, the default, runs one at a time).")


def test_concurrency_with_a_forking_worker_class_is_refused_naming_both_and_the_fix():
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--concurrency", "4", "--worker-class", "queues.worker.OptimaWorker")
    assert str(refused.value) == (
        "--concurrency 4 runs 4 jobs at once in threads of one fork-free process "
        "(queues.worker.OptimaConcurrentWorker); it cannot be combined with --worker-class "
        "'queues.worker.OptimaWorker', which runs one job at a time. Drop --worker-class (or name a subclass of "
        "queues.worker.OptimaConcurrentWorker), or drop --concurrency and run more processes (rqworker-pool "
        "--num-workers).")


def test_the_rqworker_command_line_refuses_a_concurrency_that_is_not_a_number(subprocess_env):
    done = run_command("rqworker", "default", "--concurrency", "abc", env=subprocess_env)
    assert done.returncode == 1
    assert "--concurrency must be a whole number of jobs >= 1, got 'abc'. Example: --concurrency 8" in done.stderr
