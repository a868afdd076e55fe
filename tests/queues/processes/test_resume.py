"""Issue 34, long jobs that resume: real workers, real signals (queues/jobs/resume.py).

``tests.jobs.long.walk`` does items ``cursor .. total - 1`` with one checkpoint after each and logs each item
it starts and finishes, so a test counts how many times each item ran: a SIGTERM mid-run pauses the job at
its next checkpoint (back to its queue, no attempt spent), and the next worker goes on from the cursor; so
does a job past its ``max_run_seconds``; a canceled one stops there for good; after a SIGKILL or a failure
the job runs again from its last checkpoint.
"""

import signal

import pytest
from rq.job import JobStatus
from rq.registry import CanceledJobRegistry, StartedJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import meta as jobmeta
from queues.jobs import resume
from tests.jobs import long
from tests.support import wait_for
from tests.support.lifecycle import release_now, wait_scheduled_for_attempt

# once: Redis and worker processes only, CI's SQLite pass (pytest.ini)
pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.once]

KINDS = {
    "forking": [],
    "no-fork": ["--no-fork"],
    "concurrency-2": ["--concurrency", "2"],
}
STOPPING = "taking no new job"  # the worker's line on a first SIGTERM while a job runs (worker/stop.py)


def fetch(connection, job_id):
    return OptimaJob.fetch(job_id, connection=connection)


def status(connection, job_id):
    return fetch(connection, job_id).get_status(refresh=True)


def finished(connection, job_id):
    return status(connection, job_id) == JobStatus.FINISHED


def runs(path):
    """The cursor each run of the job started from, in order."""
    return [r["cursor"] for r in long.records(path) if r["event"] == "run"]


def stop_mid_item(worker, path, item, release):
    """SIGTERM ``worker`` while ``item`` is in flight, then let the item finish: the pause comes at its checkpoint."""
    wait_for(lambda: item in long.started(path), timeout=60, message=f"item {item} to start")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: STOPPING in worker.output(), timeout=30, message="the worker to hear its SIGTERM")
    release.touch()


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_long_job_sigtermed_mid_run_resumes_at_its_cursor_with_no_attempt_spent(
    kind, start_worker, queue_redis, tmp_path
):
    path, release = tmp_path / "items.jsonl", tmp_path / "release"
    job = queues.enqueue("default", long.walk, str(path), 8, hold_at=3, release=str(release))
    first = start_worker("default", "--grace", "120", *KINDS[kind])
    stop_mid_item(first, path, 3, release)
    assert first.wait(60) == 0, first.output()[-4000:]

    paused = fetch(queue_redis, job.id)
    assert paused.get_status() == JobStatus.QUEUED
    assert get_queue("default").get_job_ids() == [job.id]  # back at the head of its queue
    assert StartedJobRegistry("default", connection=queue_redis).get_job_ids(cleanup=False) == []
    assert paused.meta["cursor"] == {"next": 4}
    assert paused.meta["attempt"] == 1 and paused.meta["interruptions"] == 1
    assert paused.meta["progress"] == {"percent": 50, "step": 4, "steps": 8}
    # Its push vouches for its next pop (issue 32): the pause's, or — a concurrent worker's main thread may pop
    # it again in the moment before it sees the stop — that pop's give-back.
    vouched = {jobmeta.PUT_BACK_PAUSE.encode(), jobmeta.PUT_BACK_GIVE_BACK.encode()}
    assert queue_redis.hget(paused.key, jobmeta.PUT_BACK) in (vouched if kind == "concurrency-2" else {b"pause"})
    assert paused.latest_result() is None  # neither a success nor a failure
    assert long.done(path) == [0, 1, 2, 3]

    start_worker("default", *KINDS[kind])
    wait_for(lambda: finished(queue_redis, job.id), timeout=60, message=f"job {job.id} to finish")
    assert long.done(path) == list(range(8))  # every item once: the one in flight finished before the pause
    assert runs(path) == [0, 4]
    done = fetch(queue_redis, job.id)
    assert done.meta["attempt"] == 1 and done.meta["interruptions"] == 1
    assert done.return_value() == 8
    assert queues.job_state(job.id).progress == {"percent": 100, "step": 8, "steps": 8}


def test_a_job_past_its_max_run_seconds_pauses_and_resumes_until_it_ends_with_one_attempt(
    start_worker, queue_redis, tmp_path
):
    path = tmp_path / "items.jsonl"
    # Each item lasts 0.6 s and the job pauses at the first checkpoint past 1 s: at most 2 items a run.
    job = queues.enqueue("default", long.walk, str(path), 6, step_seconds=0.6, max_run_seconds=1)
    start_worker("default", "--no-fork")
    wait_for(lambda: finished(queue_redis, job.id), timeout=90, message=f"job {job.id} to finish")
    assert long.done(path) == list(range(6))
    done = fetch(queue_redis, job.id)
    assert done.meta["attempt"] == 1
    assert done.meta["interruptions"] == len(runs(path)) - 1 >= 2
    assert done.meta["last_interruption"].startswith("paused at a checkpoint: it ran ")
    assert runs(path)[0] == 0 and runs(path) == sorted(runs(path))


def test_a_canceled_long_job_stops_at_its_next_checkpoint_for_good(start_worker, queue_redis, tmp_path):
    path, release = tmp_path / "items.jsonl", tmp_path / "release"
    job = queues.enqueue("default", long.walk, str(path), 8, hold_at=2, release=str(release))
    start_worker("default", "--no-fork")
    wait_for(lambda: 2 in long.started(path), timeout=60, message="item 2 to start")
    answer = queues.cancel(job.id)
    assert (answer.outcome, answer.state) == ("canceling", "started")
    release.touch()
    wait_for(lambda: status(queue_redis, job.id) == JobStatus.CANCELED, timeout=60, message="the cancel")
    assert long.done(path) == [0, 1, 2]
    assert job.id in CanceledJobRegistry("default", connection=queue_redis)
    assert StartedJobRegistry("default", connection=queue_redis).get_job_ids(cleanup=False) == []
    assert get_queue("default").get_job_ids() == []
    assert queue_redis.hget(fetch(queue_redis, job.id).key, resume.CANCEL_REQUESTED) is None


def test_a_failure_after_a_checkpoint_retries_from_it(start_worker, queue_redis, tmp_path):
    path = tmp_path / "items.jsonl"
    job = queues.enqueue("default", long.walk, str(path), 6, fail_at=4)
    start_worker("default", "--no-fork", "--burst")
    wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    assert fetch(queue_redis, job.id).meta["cursor"] == {"next": 4}
    release_now(queue_redis, "default", job.id)
    start_worker("default", "--no-fork")
    wait_for(lambda: finished(queue_redis, job.id), timeout=60, message=f"job {job.id} to finish")
    assert runs(path) == [0, 4]
    assert long.done(path) == list(range(6))
    assert long.started(path) == [0, 1, 2, 3, 4, 4, 5]  # the item that failed runs again, none before it


def test_a_sigkilled_long_job_reruns_from_its_last_checkpoint(start_worker, queue_redis, tmp_path):
    path, release = tmp_path / "items.jsonl", tmp_path / "release"
    job = queues.enqueue("default", long.walk, str(path), 6, hold_at=3, release=str(release))
    first = start_worker("default")
    wait_for(lambda: 3 in long.started(path), timeout=60, message="item 3 to start")
    first.process.kill()  # SIGKILL: the worker and (it dies with its worker) its horse
    first.wait(30)
    release.touch()
    start_worker("default")  # its abandoned-job scan finds the job of the dead worker: a retry
    wait_for(lambda: finished(queue_redis, job.id), timeout=120, message=f"job {job.id} to run again and finish")
    assert runs(path) == [0, 3]
    assert long.started(path) == [0, 1, 2, 3, 3, 4, 5]  # the item in flight runs again: at least once
    assert long.done(path) == list(range(6))


def test_in_a_pool_a_sigtermed_long_job_pauses_and_resumes(start_worker, queue_redis, tmp_path):
    path, release = tmp_path / "items.jsonl", tmp_path / "release"
    job = queues.enqueue("default", long.walk, str(path), 6, hold_at=2, release=str(release))
    pool = start_worker("default", "--num-workers", "1", "--grace", "120", command="rqworker-pool")
    stop_mid_item(pool, path, 2, release)
    assert pool.wait(60) == 0, pool.output()[-4000:]
    paused = fetch(queue_redis, job.id)
    assert paused.get_status() == JobStatus.QUEUED
    assert (paused.meta["cursor"], paused.meta["attempt"], paused.meta["interruptions"]) == ({"next": 3}, 1, 1)
    start_worker("default", "--num-workers", "1", command="rqworker-pool")
    wait_for(lambda: finished(queue_redis, job.id), timeout=60, message=f"job {job.id} to finish")
    assert long.done(path) == list(range(6))
    assert runs(path) == [0, 3]


def test_a_task_sigtermed_mid_run_resumes_at_its_cursor(start_worker, queue_redis, tmp_path):
    path, release = tmp_path / "items.jsonl", tmp_path / "release"
    result = long.walk_task.enqueue(str(path), 6, hold_at=2, release=str(release))
    first = start_worker("default", "--grace", "120")
    stop_mid_item(first, path, 2, release)
    assert first.wait(60) == 0, first.output()[-4000:]
    assert fetch(queue_redis, result.id).meta["cursor"] == {"next": 3}
    start_worker("default", "--no-fork")
    wait_for(lambda: finished(queue_redis, result.id), timeout=60, message=f"task {result.id} to finish")
    assert long.walk_task.get_result(result.id).return_value == 6
    assert long.done(path) == list(range(6))
    assert runs(path) == [0, 3]
    assert fetch(queue_redis, result.id).meta["attempt"] == 1


def test_a_concurrent_worker_pauses_each_running_long_job_at_its_own_checkpoint(start_worker, queue_redis, tmp_path):
    walks = []
    for n in range(2):
        path, release = tmp_path / f"items-{n}.jsonl", tmp_path / f"release-{n}"
        job = queues.enqueue("default", long.walk, str(path), 5, hold_at=1 + n, release=str(release))
        walks.append((job, path, release))
    worker = start_worker("default", "--concurrency", "2", "--grace", "120")
    for n, (_, path, _) in enumerate(walks):
        wait_for(lambda path=path, n=n: 1 + n in long.started(path), timeout=60, message=f"job {n} mid-run")
    worker.signal(signal.SIGTERM)
    wait_for(lambda: STOPPING in worker.output(), timeout=30, message="the worker to hear its SIGTERM")
    for _, _, release in walks:
        release.touch()
    assert worker.wait(60) == 0, worker.output()[-4000:]
    for n, (job, path, _) in enumerate(walks):
        paused = fetch(queue_redis, job.id)
        assert paused.get_status() == JobStatus.QUEUED
        assert (paused.meta["cursor"], paused.meta["attempt"], paused.meta["interruptions"]) == ({"next": 2 + n}, 1, 1)
        assert long.done(path) == list(range(2 + n))
    assert sorted(get_queue("default").get_job_ids()) == sorted(job.id for job, _, _ in walks)
