"""``manage.py rqworker-pool``: N OptimaWorkers forked from one master, with real processes, real
signals and the session's Redis. The members run JSON jobs only, stop gracefully when the master
is signalled, die with it when it is killed, and are forked again when one of them dies."""

import os
import shutil
import signal

import pytest
import redis
from rq import Queue
from rq.job import JobStatus
from rq.registry import FailedJobRegistry, StartedJobRegistry
from rq.serializers import DefaultSerializer
from rq.worker import Worker

import queues
from devtools.redis_server import RedisServer
from queues.catalog.lookup import OptimaJob, get_queue
from tests.jobs.resilience import ends, starts
from tests.support import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOB = "tests.jobs.resilience.logged_sleep"
BARRIER = "tests.jobs.resilience.wait_for_file_then_return"


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


def start_pool(start_worker, *args, env=None):
    return start_worker(*args, env=env, command="rqworker-pool")


def _stat(pid):
    """(state, parent pid) of a process from /proc, or None once it is reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[1])


def gone(pid):
    """The process has exited (a zombie nobody reaped yet counts as gone)."""
    stat = _stat(pid)
    return stat is None or stat[0] == "Z"


def parent_of(pid):
    return _stat(pid)[1]


def members(pool):
    """Pids of the master's live worker processes (its direct children)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(entry)
            if stat is not None and stat[1] == pool.pid and stat[0] != "Z":
                found.append(int(entry))
    return sorted(found)


def wait_members(pool, count):
    return wait_for(lambda: len(members(pool)) == count and members(pool), timeout=60, message=f"{count} pool members")


def wait_started(log, count=1):
    return wait_for(lambda: len(starts(log)) >= count and starts(log), timeout=60, message=f"{count} start(s) in {log}")


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_pool_of_two_runs_json_jobs_on_both_members(start_worker, queue_redis, tmp_path):
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    pool = start_pool(start_worker, "default", "--num-workers", "2")
    # Each job waits for the release file: both can only be running at once on two members.
    jobs = [queues.enqueue("default", BARRIER, str(log), str(release), value=f"job-{i}") for i in range(2)]
    wait_started(log, 2)
    names = {w.name for w in Worker.all(connection=queue_redis)}
    release.touch()

    for job in jobs:
        wait_for(
            lambda job=job: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
            timeout=60,
            message=f"job {job.id} to finish",
        )
    finished = [fetch(job.id, queue_redis) for job in jobs]
    assert [job.return_value() for job in finished] == ["job-0", "job-1"]
    assert len(names) == 2
    assert {job.worker_name for job in finished} == names
    assert len({r["pid"] for r in starts(log)}) == 2
    assert pool.process.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_stop_signal_to_the_master_lets_the_running_job_finish_and_the_pool_exits_0(
    start_worker, queue_redis, tmp_path, sig
):
    log = tmp_path / "runs.jsonl"
    pool = start_pool(start_worker, "default", "--num-workers", "2")
    children = wait_members(pool, 2)
    running = queues.enqueue("default", JOB, str(log), first_run_seconds=3)
    wait_started(log)

    pool.signal(sig)

    assert pool.wait(60) == 0, pool.output()
    job = fetch(running.id, queue_redis)
    assert job.get_status() == JobStatus.FINISHED
    assert job.return_value() == "done"
    assert len(ends(log)) == 1
    assert [pid for pid in children if not gone(pid)] == []
    assert Worker.all(connection=queue_redis) == []


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_job_still_running_when_the_grace_period_ends_goes_back_to_its_queue(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    pool = start_pool(start_worker, "default", "--num-workers", "2", "--grace", "2")
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600)
    horse_pid = wait_started(log)[0]["pid"]

    pool.signal(signal.SIGTERM)

    assert pool.wait(60) == 0, pool.output()
    job = fetch(job.id, queue_redis)
    assert job.get_status() == JobStatus.QUEUED
    assert get_queue("default").get_job_ids() == [job.id]
    assert StartedJobRegistry("default", connection=queue_redis).get_job_ids(cleanup=False) == []
    assert job.latest_result() is None
    assert job.meta["attempt"] == 1
    assert job.meta["interruptions"] == 1
    assert "grace period of 2 s" in job.meta["last_interruption"]
    assert ends(log) == []
    assert gone(horse_pid)


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_sigkill_of_the_master_takes_its_members_along_and_their_job_runs_again(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    pool = start_pool(start_worker, "default", "--num-workers", "2")
    children = wait_members(pool, 2)
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600)
    horse_pid = wait_started(log)[0]["pid"]

    pool.signal(signal.SIGKILL)
    assert pool.wait(10) == -signal.SIGKILL

    wait_for(
        lambda: all(gone(pid) for pid in [*children, horse_pid]),
        timeout=10,
        message="the members and the work horse to die with the master",
    )
    start_worker("default")
    wait_for(lambda: ends(log), timeout=90, message="the job's second run to end")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="the worker to record the job as finished",
    )  # it logs before the worker records
    runs = starts(log)
    assert [r["attempt"] for r in runs] == [1, 2]
    assert runs[1]["pid"] != horse_pid


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_member_that_dies_is_replaced_and_its_job_runs_again(start_worker, queue_redis, tmp_path):
    log = tmp_path / "runs.jsonl"
    pool = start_pool(start_worker, "default", "--num-workers", "2")
    job = queues.enqueue("default", JOB, str(log), first_run_seconds=600)
    horse_pid = wait_started(log)[0]["pid"]
    before = wait_members(pool, 2)
    victim = parent_of(horse_pid)
    assert victim in before

    os.kill(victim, signal.SIGKILL)

    after = wait_for(
        lambda: victim not in members(pool) and len(members(pool)) == 2 and members(pool),
        timeout=60,
        message="the master to fork a new member",
    )
    assert len(set(after) - set(before)) == 1
    wait_for(lambda: ends(log), timeout=90, message="the job's second run to end")
    wait_for(
        lambda: fetch(job.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=30,
        message="a member to record the job as finished",
    )
    assert [r["attempt"] for r in starts(log)] == [1, 2]
    assert gone(horse_pid)
    assert pool.process.poll() is None


def test_pickled_job_is_never_run_by_the_pool(start_worker, queue_redis, tmp_path):
    marker = tmp_path / "ran"
    pickled = Queue("repricer", connection=queue_redis, serializer=DefaultSerializer).enqueue(
        "tests.jobs.sample.touch", str(marker)
    )
    after = queues.enqueue("repricer", "tests.jobs.sample.add", 2, 3)

    pool = start_pool(start_worker, "repricer", "--num-workers", "2", "--burst")

    assert pool.wait(60) == 0, pool.output()
    assert not marker.exists()
    assert pickled.id in FailedJobRegistry("repricer", connection=queue_redis)
    from queues.models import DeadLetter

    assert DeadLetter.objects.get(job_id=pickled.id).reason == "corrupt"  # dead-lettered unread, not run
    assert fetch(after.id, queue_redis).return_value() == 5


@pytest.fixture
def redis_not_yet_started(settings):
    """A private redis-server, not running yet; this process enqueues to it."""
    server = RedisServer()
    settings.QUEUES_REDIS_URL = server.url
    yield server
    server.stop()
    shutil.rmtree(server.workdir, ignore_errors=True)


def test_pool_started_before_redis_waits_for_it_then_runs_jobs(redis_not_yet_started, start_worker, tmp_path):
    server = redis_not_yet_started
    pool = start_pool(start_worker, "default", "--num-workers", "2", env={"REDIS_URL": server.url})
    wait_for(lambda: "Redis is unavailable" in pool.output(), message="the pool to report Redis missing")
    assert members(pool) == []  # nothing is forked before Redis answers

    server.start()

    client = redis.Redis.from_url(server.url)
    job = queues.enqueue("default", "tests.jobs.sample.add", 2, 3)
    wait_for(
        lambda: fetch(job.id, client).get_status() == JobStatus.FINISHED,
        timeout=60,
        message="the job to finish once Redis is up",
    )
    assert fetch(job.id, client).return_value() == 5
    assert len(members(pool)) == 2
    assert "Redis is back after" in pool.output()
    client.close()


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_member_still_running_past_the_grace_and_margin_is_killed_and_the_pool_exits_1(start_worker, queue_redis):
    pool = start_pool(start_worker, "default", "--num-workers", "2", "--grace", "0")
    stuck, other = wait_members(pool, 2)
    wait_for(lambda: len(Worker.all(connection=queue_redis)) == 2, message="both members to register")
    os.kill(stuck, signal.SIGSTOP)  # it cannot handle the stop signal

    pool.signal(signal.SIGTERM)

    assert pool.wait(60) == 1, pool.output()
    assert gone(stuck)
    assert gone(other)
    assert f"(pid {stuck}) still running 10 s after the stop signal: killing it" in pool.output()
