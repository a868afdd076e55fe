"""What a worker does when an attempt fails (queues/failures/handler.py), with real workers and Redis: here, an
attempt of a job deleted while it ran."""

import pytest

import queues
from queues.catalog.lookup import get_queue
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.operator import jobs as operator_jobs
from tests.jobs.resilience import starts
from tests.support import wait_for
from tests.support.worker import started_entries

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("how", [(), ("--no-fork",)], ids=["forking", "no-fork"])
def test_a_job_deleted_while_it_runs_is_neither_retried_nor_dead_lettered_when_it_fails(
    start_worker, queue_redis, tmp_path, how
):
    """Its failure would save the whole job again (rq's failure path), and with its meta gone a retry would run it
    again from a first attempt: a delete from the panel would not stick. The worker ends its execution and records
    nothing more."""
    log, release = tmp_path / "runs.jsonl", tmp_path / "release"
    job = queues.enqueue("default", "tests.jobs.resilience.wait_for_file_then_fail", str(log), str(release), attempts=3)
    worker = start_worker("default", *how)
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    result = operator_jobs.run("delete", get_queue("default"), job.id)
    assert result.detail == "deleted", result
    release.touch()
    wait_for(
        lambda: f"job {job.id} was deleted while it ran" in worker.output(),
        timeout=60,
        message=f"the worker to drop the deleted job's failure: {worker.output()[-3000:]}",
    )
    wait_for(lambda: started_entries(queue_redis) == [], timeout=30, message="its execution to end")
    assert not queue_redis.exists(job.key), queue_redis.hgetall(job.key)
    assert queue_redis.zcard(keys.scheduled_key("default")) == 0, "no retry scheduled"
    assert get_queue("default").job_ids == []
    assert queue_redis.zscore(keys.failed_key("default"), job.id) is None
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert len(starts(log)) == 1
    assert worker.process.poll() is None, worker.output()
