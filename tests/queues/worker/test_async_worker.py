"""``rqworker --async N`` (queues.worker.OptimaAsyncWorker) with real processes, real signals and the session's
Redis: N coroutine jobs run at once on one event loop of one process, a plain job beside them in a thread of
its own, and every guarantee of ``--concurrency`` holds per job (the SIGTERM grace, at least once after
SIGKILL, a timeout that cancels the coroutine, retries and dead letters, stop-job)."""

import signal
from collections import Counter

import pytest
from django.core.management import CommandError, call_command
from django_tasks import TaskResultStatus
from rq.command import send_stop_job_command
from rq.job import JobStatus
from rq.serializers import JSONSerializer

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from tests.jobs import asyncjobs, long
from tests.jobs.concurrent import records
from tests.queues.worker.test_concurrency import assert_back_at_head, finished, most_at_once, run_command
from tests.support import wait_for
from tests.support.lifecycle import wait_row, wait_scheduled_for_attempt

pytestmark = [pytest.mark.django_db(transaction=True)]

TOGETHER_ASYNC = "tests.jobs.concurrent.together_async"
WAIT = "tests.jobs.asyncjobs.wait_for_file"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def succeeded(result):
    result.refresh()
    return result.status == TaskResultStatus.SUCCESSFUL


def started(log, count):
    return wait_for(
        lambda: len(records(log, "start")) >= count and records(log, "start"),
        timeout=60,
        message=f"{count} job(s) to start",
    )


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_twenty_coroutine_jobs_overlap_on_one_event_loop_of_the_worker_process(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [queues.enqueue("default", TOGETHER_ASYNC, str(log), 20, attempts=1) for _ in range(20)]
    worker = start_worker("default", "--async", "20")
    wait_for(lambda: finished(jobs, queue_redis), timeout=60, message="the 20 coroutine jobs to finish")
    runs = records(log)
    assert most_at_once(runs) == 20  # each waited until all 20 had started: they overlapped
    assert {r["pid"] for r in runs} == {worker.pid}
    assert len({r["thread"] for r in runs}) == 1  # one event loop's thread, not a thread per job
    assert sorted(r["job"] for r in records(log, "start")) == sorted(job.id for job in jobs)  # get_current_job()
    assert [fetch(job.id, queue_redis).return_value() for job in jobs] == ["async done"] * 20
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_task_coroutines_share_the_loop_with_job_coroutines(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    results = [asyncjobs.task_together.enqueue(str(log), 4) for _ in range(2)]
    jobs = [queues.enqueue("default", TOGETHER_ASYNC, str(log), 4, attempts=1) for _ in range(2)]
    worker = start_worker("default", "--async", "4")
    wait_for(
        lambda: finished(jobs, queue_redis) and all(succeeded(result) for result in results),
        timeout=60,
        message="the 2 tasks and 2 jobs to finish",
    )
    assert [r.return_value for r in results] == [r.id for r in results]  # its TaskContext, on the loop
    starts = records(log, "start")
    assert most_at_once(records(log)) == 4
    assert len({r["thread"] for r in starts}) == 1
    assert sorted(r["context_attempt"] for r in starts if "context_attempt" in r) == [1, 1]
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_plain_job_runs_in_a_thread_of_its_own_beside_the_coroutines(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    plain = queues.enqueue("default", "tests.jobs.concurrent.together", str(log), 3, attempts=1)
    coros = [queues.enqueue("default", TOGETHER_ASYNC, str(log), 3, attempts=1) for _ in range(2)]
    worker = start_worker("default", "--async", "4")
    wait_for(lambda: finished([plain, *coros], queue_redis), timeout=60, message="the 3 jobs to finish")
    starts = {r["job"]: r["thread"] for r in records(log, "start")}
    assert starts[coros[0].id] == starts[coros[1].id]  # the loop's thread
    assert starts[plain.id] != starts[coros[0].id]
    assert fetch(plain.id, queue_redis).return_value() == starts[plain.id]  # it returns its thread's id
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_sigterm_lets_running_coroutines_finish_then_cancels_the_rest_and_puts_them_back(
    start_worker, queue_redis, tmp_path
):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    quick = queues.enqueue("default", WAIT, str(log), str(release))
    stuck = queues.enqueue("default", WAIT, str(log), str(tmp_path / "never"))
    worker = start_worker("default", "--async", "4", "--grace", "3")
    started(log, 2)
    worker.signal(signal.SIGTERM)
    wait_for(lambda: "taking no new job" in worker.output(), message="the signal to be handled")
    later = queues.enqueue("default", WAIT, str(log), str(release))  # a slot is free: not taken
    release.touch()
    assert worker.wait(60) == 0, worker.output()
    assert fetch(quick.id, queue_redis).get_status() == JobStatus.FINISHED
    assert_back_at_head(stuck, queue_redis)
    assert get_queue("default").get_job_ids() == [stuck.id, later.id]
    assert sorted(r["job"] for r in records(log, "start")) == sorted([quick.id, stuck.id])
    assert [(r["event"], r["ended"]) for r in records(log) if r["job"] == stuck.id and "ended" in r] == [
        ("finally", False)
    ]  # cancelled before the exit: its finally ran
    assert [r["job"] for r in records(log, "cancelled")] == [stuck.id]
    assert "the shutdown grace period of 3 s ran out" in worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_long_coroutine_sigtermed_mid_run_pauses_at_its_checkpoint_and_resumes_at_its_cursor(
    start_worker, queue_redis, tmp_path
):
    path, release = tmp_path / "items.jsonl", tmp_path / "release"
    job = queues.enqueue("default", "tests.jobs.asyncjobs.walk_async", str(path), 8, hold_at=3, release=str(release))
    first = start_worker("default", "--async", "2", "--grace", "120")
    wait_for(lambda: 3 in long.started(path), timeout=60, message="item 3 to start")
    first.signal(signal.SIGTERM)
    wait_for(lambda: "taking no new job" in first.output(), message="the worker to hear its SIGTERM")
    release.touch()
    assert first.wait(60) == 0, first.output()
    paused = fetch(job.id, queue_redis)
    assert paused.get_status() == JobStatus.QUEUED
    assert (paused.meta["cursor"], paused.meta["attempt"], paused.meta["interruptions"]) == ({"next": 4}, 1, 1)
    assert long.done(path) == [0, 1, 2, 3]
    start_worker("default", "--async", "2")
    wait_for(lambda: finished([job], queue_redis), timeout=60, message="the job to finish")
    assert long.done(path) == list(range(8))  # every item once
    assert [r["cursor"] for r in long.records(path) if r["event"] == "run"] == [0, 4]
    assert fetch(job.id, queue_redis).return_value() == 8


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_sigkill_re_runs_every_coroutine_job_the_process_held_once_each(start_worker, queue_redis, tmp_path):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    jobs = [queues.enqueue("default", WAIT, str(log), str(release), attempts=3) for _ in range(4)]
    victim = start_worker("default", "--async", "4")
    started(log, 4)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    release.touch()
    start_worker("default", "--async", "4")
    wait_for(lambda: finished(jobs, queue_redis), timeout=90, message="the 4 jobs to run again and finish")
    starts = records(log, "start")
    assert Counter(r["job"] for r in starts) == {job.id: 2 for job in jobs}  # each once more, none twice more
    assert sorted((r["pid"] == victim.pid, r["attempt"]) for r in starts) == [(False, 2)] * 4 + [(True, 1)] * 4


@pytest.mark.slow
def test_a_timeout_cancels_the_coroutine_and_fails_the_attempt_as_timed_out_while_others_run(
    start_worker, queue_redis, tmp_path
):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    other = queues.enqueue("default", WAIT, str(log), str(release))
    late = queues.enqueue("default", WAIT, str(log), str(tmp_path / "never"), timeout=1, attempts=2)
    worker = start_worker("default", "--async", "3")
    row = wait_row(late.id, timeout=60)
    assert (row.reason, row.attempts_made) == ("timeout", 2)
    assert "JobTimeoutException" in row.exc_type
    assert "Task exceeded maximum timeout value (1 seconds)" in row.exc_message
    mine = [(r["event"], r["attempt"]) for r in records(log) if r["job"] == late.id]
    assert mine == [("start", 1), ("cancelled", 1), ("finally", 1), ("start", 2), ("cancelled", 2), ("finally", 2)]
    assert fetch(other.id, queue_redis).get_status() == JobStatus.STARTED  # untouched meanwhile
    release.touch()
    wait_for(lambda: finished([other], queue_redis), timeout=30, message="the other job to finish")
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_coroutine_that_ignores_its_cancel_fails_past_the_margin_and_the_worker_exits_1_after_the_others(
    start_worker, queue_redis, tmp_path
):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    other = queues.enqueue("default", WAIT, str(log), str(release))
    stubborn = queues.enqueue("default", "tests.jobs.asyncjobs.ignore_cancel", str(log), 60, timeout=1, attempts=2)
    worker = start_worker(
        "default", "--async", "2", "--worker-class", "tests.support.concurrent_workers.QuickToGiveUpAsyncWorker"
    )
    retry = wait_scheduled_for_attempt(queue_redis, "default", stubborn.id, 2)
    assert "Task exceeded maximum timeout value (1 seconds)" in retry.results()[0].exc_string
    assert [r["job"] for r in records(log, "cancel ignored")] == [stubborn.id]
    late = queues.enqueue("default", WAIT, str(log), str(release))  # the worker takes no new job
    release.touch()
    assert worker.wait(60) == 1, worker.output()
    assert fetch(other.id, queue_redis).get_status() == JobStatus.FINISHED
    assert fetch(late.id, queue_redis).get_status() == JobStatus.QUEUED
    assert [r["job"] for r in records(log, "end")] == [other.id]
    assert "still running 2 s past its timeout of 1 s" in worker.output()


@pytest.mark.slow
def test_a_coroutine_that_raises_is_retried_then_dead_lettered(start_worker, tmp_path):
    log = tmp_path / "runs.jsonl"
    failing = queues.enqueue("default", "tests.jobs.asyncjobs.fail_async", str(log), "still broken", attempts=2)
    worker = start_worker("default", "--async", "2")
    row = wait_row(failing.id, timeout=60)
    assert (row.reason, row.attempts_made, row.exc_message) == ("exhausted", 2, "still broken")
    assert row.exc_type.endswith("RuntimeError")
    assert [r["attempt"] for r in records(log, "start")] == [1, 2]
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
def test_stop_job_cancels_only_the_coroutine_it_names(start_worker, queue_redis, tmp_path):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    jobs = [queues.enqueue("default", WAIT, str(log), str(release), attempts=3) for _ in range(3)]
    worker = start_worker("default", "--async", "3")
    started(log, 3)
    wait_for(lambda: all(fetch(job.id, queue_redis).worker_name for job in jobs), message="the 3 jobs registered")
    send_stop_job_command(queue_redis, jobs[1].id, serializer=JSONSerializer)
    row = wait_row(jobs[1].id, timeout=30)
    assert (row.reason, row.attempts_made) == ("stopped", 1)
    assert fetch(jobs[1].id, queue_redis).get_status() == JobStatus.STOPPED
    assert [r["job"] for r in records(log, "cancelled")] == [jobs[1].id]
    release.touch()
    wait_for(lambda: finished([jobs[0], jobs[2]], queue_redis), timeout=30, message="the other two to finish")
    assert worker.stop() == 0, worker.output()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_limit_key_holds_its_share_of_coroutines_on_the_loop(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [
        queues.enqueue(
            "default", "tests.jobs.asyncjobs.pause_async", str(log), 0.3, limit_key="seller:1", limit_concurrency=2
        )
        for _ in range(6)
    ]
    free = [queues.enqueue("default", TOGETHER_ASYNC, str(tmp_path / "free.jsonl"), 3) for _ in range(3)]
    worker = start_worker("default", "--async", "8")
    wait_for(lambda: finished(jobs + free, queue_redis), timeout=60, message="every job to finish")
    assert most_at_once(records(log)) == 2
    assert worker.stop() == 0, worker.output()


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many"])
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_bad_async_value_is_refused_naming_the_option_the_value_and_an_example(value):
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--async", value)
    assert str(refused.value) == (
        f"--async must be a whole number of jobs >= 1, got {value!r}. Example: --async 500 (up to 500 jobs at once "
        "in one process: async def jobs as coroutines of one event loop, plain ones each in a thread)."
    )


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_async_with_concurrency_is_refused_saying_async_sizes_both():
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--async", "50", "--concurrency", "8")
    assert str(refused.value) == (
        "--async 50 cannot be combined with --concurrency 8: --async 50 already runs up to 50 jobs at once "
        "(async def jobs on one event loop, plain functions each in a thread of their own). Drop --concurrency."
    )


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_async_with_a_forking_worker_class_is_refused_naming_both_and_the_fix():
    with pytest.raises(CommandError) as refused:
        call_command("rqworker", "default", "--async", "4", "--worker-class", "queues.worker.OptimaConcurrentWorker")
    assert str(refused.value) == (
        "--async 4 runs queues.worker.OptimaAsyncWorker (up to 4 jobs at once in one fork-free process, async def "
        "jobs on one event loop); it cannot be combined with --worker-class 'queues.worker.OptimaConcurrentWorker'. "
        "Drop --worker-class (or name a subclass of queues.worker.OptimaAsyncWorker)."
    )


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_rqworker_pool_refuses_async_with_concurrency_too(subprocess_env):
    done = run_command("rqworker-pool", "default", "--async", "4", "--concurrency", "2", env=subprocess_env)
    assert done.returncode == 1
    assert "--async 4 cannot be combined with --concurrency 2" in done.stderr


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_rqworker_pool_with_async_runs_the_coroutines_of_each_member_on_its_loop(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    jobs = [queues.enqueue("default", TOGETHER_ASYNC, str(log), 8, attempts=1) for _ in range(8)]
    pool = start_worker("default", "--num-workers", "2", "--async", "4", command="rqworker-pool")
    wait_for(lambda: finished(jobs, queue_redis), timeout=60, message="the 8 jobs to finish")
    starts = records(log, "start")
    assert Counter(Counter(r["pid"] for r in starts).values()) == {4: 2}  # 2 members, 4 jobs each
    assert len({(r["pid"], r["thread"]) for r in starts}) == 2  # one loop's thread in each member
    assert pool.stop() == 0, pool.output()
