"""The fork-free worker's own bookkeeping of a success (queues/worker/fastpath.py) with real workers and Redis:
what it writes is counted in test_round_trips.py; here, a success that finds its job deleted."""

import pytest
from rq.job import JobStatus
from rq.results import Result

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.keyspace import keys
from queues.operator import jobs as operator_jobs
from tests.jobs.resilience import ends, starts
from tests.support import wait_for
from tests.support.worker import started_entries

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


@pytest.mark.parametrize("how", [("--no-fork",), ("--concurrency", "2")], ids=["no-fork", "concurrency"])
def test_a_job_deleted_while_it_runs_is_not_made_again_by_its_success(start_worker, queue_redis, tmp_path, how):
    """The success writes only the fields it changes (``fastpath.success_fields``): an HSET of them into a job the
    panel deleted while it ran would leave a hash of five fields, listed as finished. Its success is dropped: no
    hash, no Result, no entry in the finished registry; the worker goes on with the next job."""
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    job = queues.enqueue("default", "tests.jobs.resilience.wait_for_file_then_return", str(log), str(release))
    worker = start_worker("default", *how)
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    result = operator_jobs.run("delete", get_queue("default"), job.id)
    assert result.detail == "deleted", result
    assert not queue_redis.exists(job.key)
    release.touch()
    wait_for(lambda: ends(log), timeout=60, message="the job to return")
    after = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    wait_for(
        lambda: fetch(after.id, queue_redis).get_status() == JobStatus.FINISHED,
        timeout=60,
        message="the worker to run the next job",
    )
    wait_for(
        lambda: f"Job {job.id} was deleted while it ran" in worker.output(),
        timeout=30,
        message="the worker to drop the deleted job's success",
    )
    assert not queue_redis.exists(job.key), queue_redis.hgetall(job.key)
    assert not queue_redis.exists(Result.get_key(job.id))
    assert queue_redis.zscore(keys.finished_key("default"), job.id) is None
    assert started_entries(queue_redis) == []
    assert worker.process.poll() is None, worker.output()
