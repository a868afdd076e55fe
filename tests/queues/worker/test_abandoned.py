"""The abandoned-job scan in-process, against the real Redis (queues/worker/abandoned.py)."""

import logging

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
