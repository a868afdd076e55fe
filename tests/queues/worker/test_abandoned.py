"""The abandoned-job scan in-process, against the real Redis (queues/worker/abandoned.py)."""

import logging

import pytest

import queues
from queues.catalog.lookup import OptimaJob
from queues.keyspace import keys
from queues.worker.abandoned import Scan
from tests.support.worker import plant_started


def test_a_started_job_whose_hash_cannot_be_read_does_not_stop_the_scan_of_the_others(queue_redis, caplog):
    broken = queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    queue_redis.lrem(keys.queue_key("default"), 1, broken.id)
    queue_redis.hset(broken.key, "meta", b"\x80\x04not json")
    plant_started(queue_redis, broken)
    fine = queues.enqueue("orders-sync", "tests.jobs.sample.add", 2, 2)
    queue_redis.lrem(keys.queue_key("orders-sync"), 1, fine.id)
    plant_started(queue_redis, fine)

    with caplog.at_level(logging.ERROR):
        counts = Scan(queue_redis, ["default", "orders-sync"], stale_after=10).run()

    assert counts["retried"] == 1  # the readable job got its next attempt
    assert OptimaJob.fetch(fine.id, connection=queue_redis).meta["attempt"] == 2
    skipped = [r.getMessage() for r in caplog.records if "skipped started entry" in r.getMessage()]
    assert len(skipped) == 1 and keys.job_key(broken.id) in skipped[0], skipped


def _started_job(queue_redis, queue="default"):
    job = queues.enqueue(queue, "tests.jobs.sample.add", 1, 1)
    queue_redis.lrem(keys.queue_key(queue), 1, job.id)
    return job


@pytest.mark.parametrize("release", ["this", "last"])
def test_a_job_started_by_a_dead_worker_gets_its_next_attempt_whichever_release_wrote_its_start(queue_redis, release):
    job = _started_job(queue_redis)
    plant_started(queue_redis, job, release=release)
    counts = Scan(queue_redis, ["default"], stale_after=10).run()
    assert counts["retried"] == 1
    assert OptimaJob.fetch(job.id, connection=queue_redis).meta["attempt"] == 2
    assert queue_redis.zcard(keys.started_key("default")) == 0


@pytest.mark.parametrize("release", ["this", "last"])
def test_a_job_a_live_worker_runs_is_left_alone_whichever_release_wrote_its_start(queue_redis, release):
    job = _started_job(queue_redis)
    plant_started(queue_redis, job, worker_name="busy-worker", release=release)
    queue_redis.set(keys.alive_key("busy-worker"), 1, ex=60)
    counts = Scan(queue_redis, ["default"], stale_after=10).run()
    assert counts["retried"] == counts["dead"] == 0
    assert queue_redis.zrange(keys.started_key("default"), 0, -1) == [f"{job.id}:e1".encode()]
    assert OptimaJob.fetch(job.id, connection=queue_redis).meta["attempt"] == 1


def test_an_entry_of_an_execution_its_job_has_left_is_dropped_and_the_job_s_current_one_kept(queue_redis):
    job = _started_job(queue_redis)
    plant_started(queue_redis, job, worker_name="gone-worker", execution_id="old")  # its worker died, then
    plant_started(queue_redis, job, worker_name="busy-worker", execution_id="new")  # it runs again elsewhere
    queue_redis.set(keys.alive_key("busy-worker"), 1, ex=60)
    counts = Scan(queue_redis, ["default"], stale_after=10).run()
    assert counts["retried"] == counts["dead"] == 0  # the run on the live worker goes on
    assert queue_redis.zrange(keys.started_key("default"), 0, -1) == [f"{job.id}:new".encode()]
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status() == "started"


def test_a_started_entry_that_is_not_job_id_colon_execution_id_does_not_stop_the_scan(queue_redis, caplog):
    queue_redis.zadd(keys.started_key("default"), {"planted:by:a-writer": 9999999999})
    job = _started_job(queue_redis)
    plant_started(queue_redis, job)  # a dead worker's job, after the planted entry in the registry's order
    with caplog.at_level(logging.ERROR):
        counts = Scan(queue_redis, ["default"], stale_after=10).run()
    assert counts["retried"] == 1
    assert any("planted:by:a-writer" in r.getMessage() for r in caplog.records), caplog.text


def test_a_job_of_a_mebibyte_abandoned_by_a_dead_worker_gets_its_next_attempt_not_a_corrupt_dead_letter(queue_redis):
    """The scan reads a started job as large as a producer writes (``entries.RUN_BYTES``), not only as large as a
    panel page shows whole (``entries.JOB_BYTES``): such a job was dead-lettered ``corrupt``, which no retry undoes."""
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, "x" * (1024 * 1024))
    queue_redis.lrem(keys.queue_key("default"), 1, job.id)
    plant_started(queue_redis, job)
    counts = Scan(queue_redis, ["default"], stale_after=10).run()
    assert (counts["retried"], counts["dropped"]) == (1, 0)
    assert OptimaJob.fetch(job.id, connection=queue_redis).meta["attempt"] == 2
