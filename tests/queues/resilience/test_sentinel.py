"""Sentinel failover with real processes on loopback: a master, a replica, three sentinels
(tests/support/replica_set.py), two real workers and an rq-scheduler process pointed at the
sentinels. The master is SIGKILLed halfway through 500 enqueues that each wait for the replica
(REDIS_WAIT_REPLICAS=1): the replica is promoted, nobody is restarted, and every enqueue that
returned runs.

After the promotion the killed master's machine comes back (an empty redis-server on its port) and
Sentinel makes it the new master's replica: until then an enqueue has no replica to wait for and
raises NotReplicated, which the caller here retries, as the API's clients and the outbox do.
"""

import threading
import time

import pytest
import redis
from django.core.cache import cache

import queues
from queues.periodic.schedules import scheduled_jobs_key
from tests.support import poll, wait_for
from tests.support.lifecycle import WORKER_ENV
from tests.support.replica_set import MASTER_NAME, ReplicaSet

JOBS = 500
KILL_AT = 200


@pytest.fixture
def replica_set():
    rs = ReplicaSet(replicas=1, sentinels=3).start()
    yield rs
    rs.stop()


def failover_env(rs):
    return {
        "REDIS_URL": rs.master.url,
        "REDIS_SENTINELS": rs.sentinel_setting,
        "REDIS_SENTINEL_MASTER": MASTER_NAME,
        "REDIS_WAIT_REPLICAS": "1",
        "REDIS_WAIT_TIMEOUT_MS": "500",
    }


def use_sentinels(settings, rs):
    """This process (the web's part: enqueue, cache) on the sentinels, as the environment would set it."""
    settings.QUEUES_REDIS_URL = settings.CACHE_REDIS_URL = rs.master.url
    settings.QUEUES_REDIS_SENTINELS = settings.CACHE_REDIS_SENTINELS = rs.sentinel_setting
    settings.QUEUES_REDIS_SENTINEL_MASTER = settings.CACHE_REDIS_SENTINEL_MASTER = MASTER_NAME
    settings.QUEUES_REDIS_WAIT_REPLICAS, settings.QUEUES_REDIS_WAIT_TIMEOUT_MS = "1", "500"
    settings.CACHES = {
        "default": dict(
            settings.CACHES["default"],
            LOCATION=rs.master.url,
            OPTIONS=dict(settings.CACHES["default"]["OPTIONS"], pool_class="queues.sentinel.CacheSentinelPool"),
        )
    }


def enqueue_until_acknowledged(path, i, deadline):
    """Enqueue run ``i``; retried while the queues are unavailable (the failover), as a caller would.
    A retry after NotReplicated may run ``i`` twice: at least once is the contract."""

    def attempt():
        try:
            return queues.enqueue("default", "tests.jobs.sample.touch", str(path), str(i))
        except queues.QueueUnavailable:
            if time.monotonic() > deadline:
                raise
            return None

    return poll(attempt, timeout=deadline - time.monotonic() + 1, interval=0.1)


def restart_after_promotion(rs, old_master, deadline, promotion):
    """The dead master's machine coming back once a replica has taken over (its port noted in
    ``promotion``)."""
    port = poll(lambda: (p := rs.master_port()) != old_master and p, timeout=deadline - time.monotonic(), interval=0.1)
    if not port:
        return
    promotion["port"] = port
    rs.master.start()


def settled(rs):
    """The master the sentinels name, once it is a master and the other node its replica; else None."""
    master = rs.node_on(rs.master_port())
    other = rs.replicas[0] if master is rs.master else rs.master
    try:
        ok = (
            master.client().info("replication")["role"] == "master"
            and other.client().info("replication")["role"] == "slave"
        )
    except redis.RedisError:
        return None
    return master if ok else None


def runs(path):
    return set(path.read_text().split()) if path.exists() else set()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_master_promotes_a_replica_and_every_acknowledged_enqueue_runs_without_restarts(
    replica_set, settings, start_worker, tmp_path, lifecycle_schedules
):
    rs = replica_set  # requested first: torn down last, after the workers stopped
    use_sentinels(settings, rs)
    env = dict(WORKER_ENV, **failover_env(rs))
    workers = [start_worker("default", "lifecycle", env=env) for _ in range(2)]
    scheduler = start_worker("--interval", "1", command="rqscheduler", env=env)
    wait_for(lambda: "Periodic jobs:" in scheduler.output(), timeout=60, message="the rqscheduler's registration")
    path = tmp_path / "runs.txt"
    old_master = rs.master.port
    assert cache.set("before", "1") is None and cache.get("before") == "1"

    deadline = time.monotonic() + 60
    promotion = {}
    comeback = threading.Thread(target=restart_after_promotion, args=(rs, old_master, deadline, promotion))
    for i in range(JOBS):
        if i == KILL_AT:
            rs.master.kill()
            comeback.start()
        enqueue_until_acknowledged(path, i, deadline)
    comeback.join()

    assert rs.node_on(promotion["port"]) is rs.replicas[0]  # Sentinel promoted the replica
    # The old master comes back empty and Sentinel makes it a replica. On a loaded machine Sentinel
    # may fail over once more (a master silent for down-after-milliseconds), back to the old one by
    # then synced: either way, one node ends up master and the other its replica.
    wait_for(lambda: settled(rs), timeout=30, message="one master and its replica after the failover")
    wait_for(lambda: len(runs(path)) == JOBS, timeout=60, message=f"all {JOBS} acknowledged jobs to run")
    assert runs(path) == {str(i) for i in range(JOBS)}

    # The schedulers go on against the promoted master: RQ's (in the workers) runs a delayed job,
    # the rqscheduler process enqueues a periodic job's tick and moves the template on.
    queues.enqueue("default", "tests.jobs.sample.touch", str(path), "delayed", delay=1)
    due = time.time() - 1
    wait_for(lambda: settled(rs), timeout=30, message="a settled master").client().zadd(
        scheduled_jobs_key(), {"schedule-tick": due}
    )
    wait_for(lambda: "delayed" in runs(path), timeout=30, message="the delayed job to run")
    wait_for(
        lambda: ((settled(rs) or rs.master).client().zscore(scheduled_jobs_key(), "schedule-tick") or 0) > due,
        timeout=30,
        message="the rqscheduler to enqueue the tick",
    )
    # The web's cache goes on too.
    cache.set("after", "2")
    assert cache.get("after") == "2"
    # /healthz, the eviction check and /metrics ask the sentinels too: the promoted master answers
    # them, not the old master that REDIS_URL names (a replica now).
    from queues import health
    from queues.connection import info as redisinfo
    from queues.metrics import store

    assert health._probe_redis("queues", eviction=True)["status"] == "ok"
    assert health._probe_redis("cache")["status"] == "ok"
    assert store.scrape_client().info("replication")["role"] == "master"
    assert redisinfo.validate() == []
    for proc in [*workers, scheduler]:
        assert proc.process.poll() is None, proc.output()
