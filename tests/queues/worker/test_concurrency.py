"""``rqworker --concurrency N`` (queues.worker.OptimaConcurrentWorker) with real processes, real signals
and the session's Redis: N jobs really run at once in one process, and every guarantee holds per job
(at least once after SIGKILL, the SIGTERM grace, the timeout, retries and dead letters, stop, limit
keys, database connections, rqworker-pool)."""

import signal
import subprocess
import sys
from collections import Counter

import pytest
import redis
from django.core.management import CommandError, call_command
from rq.command import send_stop_job_command
from rq.job import JobStatus
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer
from rq.worker import Worker

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import execution as execution_record
from queues.keyspace import keys
from queues.worker import pause
from queues.worker.concurrent import POOL_MARGIN, OptimaConcurrentWorker
from tests.jobs.concurrent import records
from tests.jobs.resilience import starts
from tests.support import ROOT, wait_for
from tests.support.clock import past_rqs_repeat_window
from tests.support.lifecycle import wait_row, wait_scheduled_for_attempt
from tests.support.worker import (
    WITH_AND_WITHOUT_RQ_RECORDS,
    assert_jobs_popped_ahead_go_back,
    paused_seen_by,
    started_entries,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

TOGETHER = "tests.jobs.concurrent.together"
HOLD = "tests.jobs.concurrent.hold"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def finished(jobs, connection):
    return all(fetch(job.id, connection).get_status() == JobStatus.FINISHED for job in jobs)


def started(log, count):
    return wait_for(
        lambda: len(records(log, "start")) >= count and records(log, "start"),
        timeout=60,
        message=f"{count} job(s) to start",
    )


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
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


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_async_jobs_run_at_once_each_with_its_own_event_loop(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [
        queues.enqueue("default", "tests.jobs.concurrent.together_async", str(log), 4, attempts=1) for _ in range(4)
    ]
    worker = start_worker("default", "--concurrency", "4")
    wait_for(lambda: finished(jobs, queue_redis), timeout=60, message="the 4 async jobs to finish")
    assert [fetch(job.id, queue_redis).return_value() for job in jobs] == ["async done"] * 4
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@WITH_AND_WITHOUT_RQ_RECORDS
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_sigkill_re_runs_every_job_the_process_held_once_each(start_worker, queue_redis, tmp_path, rq_records):
    log, release, env = tmp_path / "runs.jsonl", tmp_path / "release", {"QUEUE_RQ_EXECUTION_RECORDS": rq_records}
    jobs = [queues.enqueue("default", HOLD, str(log), str(release), attempts=3) for _ in range(4)]
    victim = start_worker("default", "--concurrency", "4", env=env)
    started(log, 4)
    entries = started_entries(queue_redis)
    owners = execution_record.owners(queue_redis, entries)  # each of its jobs, its own: queues/jobs/execution.py
    assert len(entries) == 4 and len(set(owners)) == 1 and owners[0] == fetch(jobs[0].id, queue_redis).worker_name
    assert sum(queue_redis.exists(keys.execution_key(e)) for e in entries) == (4 if rq_records == "1" else 0)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    release.touch()
    start_worker("default", "--concurrency", "4", env=env)
    wait_for(lambda: finished(jobs, queue_redis), timeout=90, message="the 4 jobs to run again and finish")
    starts = records(log, "start")
    assert Counter(r["job"] for r in starts) == {job.id: 2 for job in jobs}  # each once more, none twice more
    assert sorted((r["pid"] == victim.pid, r["attempt"]) for r in starts) == [(False, 2)] * 4 + [(True, 1)] * 4


def assert_back_at_head(job, connection, position=0):
    job = fetch(job.id, connection)
    assert job.get_status() == JobStatus.QUEUED
    assert get_queue("default").get_job_ids()[position] == job.id
    assert StartedJobRegistry("default", connection=connection).get_job_ids(cleanup=False) == []
    assert job.latest_result() is None  # recorded neither as done nor as failed
    assert (job.meta["attempt"], job.meta["interruptions"]) == (1, 1)  # the attempt is not counted


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_sigterm_takes_no_new_job_lets_running_ones_finish_and_past_the_grace_puts_the_rest_back(
    start_worker, queue_redis, tmp_path
):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    quick = queues.enqueue("default", HOLD, str(log), str(release))
    stuck = queues.enqueue("default", HOLD, str(log), str(tmp_path / "never"))
    worker = start_worker("default", "--concurrency", "4", "--grace", "3")
    started(log, 2)
    worker.signal(signal.SIGTERM)
    later = queues.enqueue("default", HOLD, str(log), str(release))  # a slot is free: not taken
    release.touch()
    assert worker.wait(60) == 0, worker.output()
    assert fetch(quick.id, queue_redis).get_status() == JobStatus.FINISHED
    assert_back_at_head(stuck, queue_redis)
    assert get_queue("default").get_job_ids() == [stuck.id, later.id]
    assert sorted(r["job"] for r in records(log, "start")) == sorted([quick.id, stuck.id])
    assert "the shutdown grace period of 3 s ran out" in worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_second_sigterm_puts_every_running_job_back_at_once(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [queues.enqueue("default", HOLD, str(log), str(tmp_path / "never")) for _ in range(2)]
    worker = start_worker("default", "--concurrency", "2", "--grace", "600")
    started(log, 2)
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "taking no new job" in worker.output(), message="the first signal to be handled")
    past_rqs_repeat_window()  # a repeat within 1 s of the first is the same stop, delivered twice
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output()
    assert sorted(get_queue("default").get_job_ids()) == sorted(job.id for job in jobs)
    for job in jobs:
        assert_back_at_head(job, queue_redis, position=get_queue("default").get_job_ids().index(job.id))


@pytest.mark.slow
def test_timeouts_failures_and_dead_letters_hold_per_job_while_others_run(start_worker, queue_redis, tmp_path):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    other = queues.enqueue("default", HOLD, str(log), str(release))
    looping = queues.enqueue("default", "tests.jobs.concurrent.spin", str(log), 300, timeout=1, attempts=2)
    failing = queues.enqueue("default", "tests.jobs.sample.fail", "still broken", attempts=2)
    worker = start_worker("default", "--concurrency", "3")
    timed_out = wait_row(looping.id, timeout=60)
    assert (timed_out.reason, timed_out.attempts_made) == ("timeout", 2)
    assert "JobTimeoutException" in timed_out.exc_type
    row = wait_row(failing.id, timeout=60)
    assert (row.reason, row.attempts_made, row.exc_message) == ("exhausted", 2, "still broken")
    spins = [r for r in records(log) if r["job"] == looping.id]
    assert [(r["event"], r["attempt"]) for r in spins] == [("start", 1), ("start", 2)]  # never ran to its end
    assert fetch(other.id, queue_redis).get_status() == JobStatus.STARTED  # untouched meanwhile
    release.touch()
    wait_for(lambda: finished([other], queue_redis), timeout=30, message="the other job to finish")
    assert worker.process.poll() is None, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_job_blocked_in_c_code_past_its_timeout_fails_and_the_worker_exits_1_after_the_others(
    start_worker, queue_redis, tmp_path
):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    other = queues.enqueue("default", HOLD, str(log), str(release))
    blocked = queues.enqueue("default", "tests.jobs.concurrent.sleep_in_c", str(log), 60, timeout=1, attempts=2)
    worker = start_worker(
        "default", "--concurrency", "2", "--worker-class", "tests.support.concurrent_workers.QuickToGiveUpWorker"
    )
    retry = wait_scheduled_for_attempt(queue_redis, "default", blocked.id, 2)
    assert "Task exceeded maximum timeout value (1 seconds)" in retry.results()[0].exc_string
    late = queues.enqueue("default", HOLD, str(log), str(release))  # the worker takes no new job
    release.touch()
    assert worker.wait(60) == 1, worker.output()
    assert fetch(other.id, queue_redis).get_status() == JobStatus.FINISHED
    assert fetch(late.id, queue_redis).get_status() == JobStatus.QUEUED
    assert [r["job"] for r in records(log, "end")] == [other.id]
    assert "still running 2 s past its timeout of 1 s" in worker.output()


@pytest.mark.slow
def test_stop_job_stops_only_the_job_it_names(start_worker, queue_redis, tmp_path):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    jobs = [queues.enqueue("default", HOLD, str(log), str(release), attempts=3) for _ in range(3)]
    worker = start_worker("default", "--concurrency", "3")
    started(log, 3)
    wait_for(lambda: all(fetch(job.id, queue_redis).worker_name for job in jobs), message="the 3 jobs registered")
    send_stop_job_command(queue_redis, jobs[1].id, serializer=JSONSerializer)
    row = wait_row(jobs[1].id, timeout=30)
    assert (row.reason, row.attempts_made) == ("stopped", 1)
    assert fetch(jobs[1].id, queue_redis).get_status() == JobStatus.STOPPED
    assert [fetch(job.id, queue_redis).get_status() for job in (jobs[0], jobs[2])] == [JobStatus.STARTED] * 2
    release.touch()
    wait_for(lambda: finished([jobs[0], jobs[2]], queue_redis), timeout=30, message="the other two to finish")
    assert [r["job"] for r in records(log, "end")].count(jobs[1].id) == 0
    assert worker.stop() == 0, worker.output()


def most_at_once(runs):
    """The most runs between their start and end at the same moment."""
    running, most = 0, 0
    for record in sorted(runs, key=lambda r: (r["at"], r["event"] == "start")):
        running += 1 if record["event"] == "start" else -1
        most = max(most, running)
    return most


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_limit_key_holds_its_share_under_concurrency(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [
        queues.enqueue(
            "default", "tests.jobs.concurrent.pause", str(log), 0.3, limit_key="seller:1", limit_concurrency=2
        )
        for _ in range(6)
    ]
    free = [queues.enqueue("default", TOGETHER, str(tmp_path / "free.jsonl"), 3) for _ in range(3)]
    worker = start_worker("default", "--concurrency", "8")
    wait_for(lambda: finished(jobs + free, queue_redis), timeout=60, message="every job to finish")
    assert most_at_once(records(log)) == 2
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_rqworker_pool_with_concurrency_runs_members_times_threads_jobs_at_once(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [queues.enqueue("default", TOGETHER, str(log), 8, attempts=1) for _ in range(8)]
    pool = start_worker("default", "--num-workers", "2", "--concurrency", "4", command="rqworker-pool")
    wait_for(lambda: finished(jobs, queue_redis), timeout=60, message="the 8 jobs to finish")
    starts = records(log, "start")
    assert Counter(Counter(r["pid"] for r in starts).values()) == {4: 2}  # 2 members, 4 jobs each
    assert pool.pid not in {r["pid"] for r in starts}
    assert pool.stop() == 0, pool.output()


def successes(connection):
    return sum(worker.successful_job_count for worker in Worker.all(connection=connection))


def connections_held(connection):
    """The database connections the worker process holds now, counted by a job it runs."""
    probe = queues.enqueue("default", "tests.jobs.concurrent.database_connections")
    wait_for(lambda: finished([probe], connection), timeout=60, message="the probe to run")
    return fetch(probe.id, connection).return_value()


@pytest.mark.slow
def test_no_database_connection_is_left_open_after_10000_jobs_at_concurrency_8(start_worker, queue_redis):
    warm_up = queues.enqueue("default", "tests.jobs.sample.whoami")
    worker = start_worker("default", "--concurrency", "8", "--without-scheduler")
    wait_for(lambda: finished([warm_up], queue_redis), timeout=60, message="the worker to start")
    before = connections_held(queue_redis)  # the main thread's, for the outbox relay (closed in job threads)
    for _ in range(10):
        queues.enqueue_many("default", "tests.jobs.concurrent.touch_db", [()] * 1000)
    wait_for(lambda: successes(queue_redis) >= 10002, timeout=300, interval=0.5, message="10,000 jobs to run")
    assert connections_held(queue_redis) == before
    assert worker.stop() == 0, worker.output()


def run_command(*args, env):
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("value", ["0", "-3", "2.5"])
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_bad_concurrency_is_refused_naming_the_option_the_value_and_an_example(value):
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--concurrency", value)
    assert str(refused.value) == (
        f"--concurrency must be a whole number of jobs >= 1, got {value!r}. Example: --concurrency 8 "
        "(8 jobs at once in one process; 1, the default, runs one at a time)."
    )


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_concurrency_with_a_forking_worker_class_is_refused_naming_both_and_the_fix():
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--concurrency", "4", "--worker-class", "queues.worker.OptimaWorker")
    assert str(refused.value) == (
        "--concurrency 4 runs 4 jobs at once in threads of one fork-free process "
        "(queues.worker.OptimaConcurrentWorker); it cannot be combined with --worker-class "
        "'queues.worker.OptimaWorker', which runs one job at a time. Drop --worker-class (or name a subclass of "
        "queues.worker.OptimaConcurrentWorker), or drop --concurrency and run more processes (rqworker-pool "
        "--num-workers)."
    )


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_rqworker_command_line_refuses_a_concurrency_that_is_not_a_number(subprocess_env):
    done = run_command("rqworker", "default", "--concurrency", "abc", env=subprocess_env)
    assert done.returncode == 1
    assert "--concurrency must be a whole number of jobs >= 1, got 'abc'. Example: --concurrency 8" in done.stderr


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_jobs_popped_in_one_call_for_the_free_slots_and_not_run_go_back_to_the_head_of_their_queue(
    start_worker, queue_redis
):
    """One pop takes a job for each free slot (``concurrent.OptimaConcurrentWorker.jobs_to_pop``); a worker that
    ends before handing them all to a slot (``--max-jobs 1`` at ``--concurrency 4``: four popped, one run) gives the
    others back, in their order, to the head of their queue, none left in the intermediate list; the next worker
    runs them."""
    jobs = [queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in range(6)]
    queue = get_queue("default")
    worker = start_worker("default", "--concurrency", "4", "--max-jobs", "1")
    assert worker.wait(60) == 0, worker.output()
    assert fetch(jobs[0].id, queue_redis).get_status() == JobStatus.FINISHED
    assert queue.get_job_ids() == [job.id for job in jobs[1:]], "the three popped with it back at the head, in order"
    assert queue_redis.llen(queue.key + ":intermediate") == 0
    start_worker("default", "--concurrency", "4", "--burst").wait(60)
    assert [fetch(job.id, queue_redis).return_value() for job in jobs] == [n + 1 for n in range(6)]


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_quick_jobs_popped_ahead_of_a_free_slot_go_back_to_their_queue_when_longer_jobs_hold_every_slot(
    start_worker, queue_redis, tmp_path
):
    """While its jobs are quick, a worker's pop takes up to ``--concurrency`` jobs beyond its free slots, held until
    a slot frees (``concurrent.OptimaConcurrentWorker.jobs_to_pop``). Two jobs that then hold both slots of a
    ``--concurrency 2`` worker leave the two popped with them waiting: after ``PREFETCH_HOLD_SECONDS`` they go back to
    the head of their queue, in their order, their start taken back and no attempt counted, and another worker runs
    them while the first still holds its two. Each job runs once, at its first attempt."""
    assert_jobs_popped_ahead_go_back(start_worker, queue_redis, tmp_path, ("--concurrency", "2"), holders=2, held=2)


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_whose_jobs_are_not_quick_pops_only_for_its_free_slots(start_worker, queue_redis, tmp_path):
    """Jobs that run longer than ``PREFETCH_BELOW_SECONDS`` (0.05 s) on average: no job is popped ahead of a free slot,
    the queue keeps what the slots cannot take for any worker to run."""
    gate_log, log, release = tmp_path / "gates.jsonl", tmp_path / "slow.jsonl", tmp_path / "go"
    warm = [queues.enqueue("default", "tests.jobs.resilience.logged_sleep", str(log), 0.2, 0.2) for _ in range(3)]
    worker = start_worker("default", "--concurrency", "2")
    wait_for(lambda: finished(warm, queue_redis), timeout=60, message="the slow jobs to finish")
    paused_seen_by(worker, queue_redis)  # the first pop after the resume finds them all (tests/support/worker.py)
    gates = [
        queues.enqueue("default", "tests.jobs.resilience.wait_for_file_then_return", str(gate_log), str(release))
        for _ in range(2)
    ]
    after = [queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in range(2)]
    pause.resume("default", queue_redis)
    wait_for(lambda: len(starts(gate_log)) == 2, timeout=60, message="the gates to start")
    assert get_queue("default").get_job_ids() == [job.id for job in after], "none popped with the gates"
    release.touch()
    wait_for(lambda: finished([*gates, *after], queue_redis), timeout=60, message="the rest to finish")
    assert worker.stop() == 0, worker.output()


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_connection_pool_has_room_for_every_slot_at_once(queue_redis):
    """redis-py's pool holds 100 connections unless told otherwise: a worker of 300 slots whose jobs all write at
    once would fail past that (MaxConnectionsError, waited out as an outage). Its pool is raised to the slots and
    a margin (``concurrent.POOL_MARGIN``), never lowered."""
    connection = redis.Redis(connection_pool=redis.ConnectionPool(**queue_redis.connection_pool.connection_kwargs))
    assert connection.connection_pool.max_connections == 100
    OptimaConcurrentWorker([get_queue("default")], connection=connection, concurrency=300)
    assert connection.connection_pool.max_connections == 300 + POOL_MARGIN
    OptimaConcurrentWorker([get_queue("default")], connection=connection, concurrency=8)
    assert connection.connection_pool.max_connections == 300 + POOL_MARGIN
