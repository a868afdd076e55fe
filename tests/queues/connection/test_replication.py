"""REDIS_WAIT_REPLICAS: an enqueue returns once a replica has the job (queues/connection/replication.py), against a
real master and replica on loopback (tests/support/replica_set.py)."""

import signal

import pytest

import queues
from queues.catalog.lookup import OptimaQueue
from queues.connection import replication
from queues.keyspace import keys
from tests.support.replica_set import ReplicaSet


@pytest.fixture(scope="module")
def replica_set():
    rs = ReplicaSet(replicas=1).start()
    yield rs
    rs.stop()


@pytest.fixture
def on_replica_set(settings, replica_set):
    """The queues' Redis is the replica set's master; every enqueue waits for one replica."""
    settings.QUEUES_REDIS_URL = replica_set.master.url
    settings.QUEUES_REDIS_WAIT_REPLICAS = "1"
    settings.QUEUES_REDIS_WAIT_TIMEOUT_MS = "300"
    return replica_set


def job_on(node, job_id):
    return node.client().exists(keys.job_key(job_id)) == 1


def test_without_wait_the_queue_is_used_unchanged(settings, queue_redis):
    settings.QUEUES_REDIS_WAIT_REPLICAS = "0"
    queue = OptimaQueue("default", connection=queue_redis)
    with replication.acknowledged(queue) as q:
        assert q is queue


def test_an_enqueue_that_waits_returns_with_the_job_already_on_the_replica(on_replica_set):
    replica = on_replica_set.replicas[0]
    for i in range(20):
        job = queues.enqueue("default", "tests.jobs.sample.add", i, 1)
        assert job_on(replica, job.id)
    delayed = queues.enqueue("default", "tests.jobs.sample.add", 1, 2, delay=3600)
    assert job_on(replica, delayed.id)


def test_a_unique_enqueue_that_waits_writes_and_waits_on_one_connection(on_replica_set):
    replica = on_replica_set.replicas[0]
    first = queues.enqueue("default", "tests.jobs.sample.add", 1, 2, unique="replicated-once")
    again = queues.enqueue("default", "tests.jobs.sample.add", 1, 2, unique="replicated-once")
    assert again.id == first.id
    assert job_on(replica, first.id)


def test_no_replica_acknowledging_within_the_timeout_raises_not_replicated_but_the_job_is_on_the_master(on_replica_set):
    replica = on_replica_set.replicas[0]
    replica.process.send_signal(signal.SIGSTOP)  # alive but silent: no ACK reaches the master
    try:
        with pytest.raises(queues.NotReplicated) as caught:
            queues.enqueue("default", "tests.jobs.sample.add", 1, 2, job_id="not-acknowledged")
    finally:
        replica.process.send_signal(signal.SIGCONT)
    assert isinstance(caught.value, queues.QueueUnavailable)
    assert (caught.value.acknowledged, caught.value.wanted, caught.value.job_written) == (0, 1, True)
    assert "only 0 of the 1 replica(s) REDIS_WAIT_REPLICAS asks for" in str(caught.value)
    assert "REDIS_WAIT_TIMEOUT_MS=300 ms" in str(caught.value)
    assert job_on(on_replica_set.master, "not-acknowledged")


def test_asking_for_more_replicas_than_exist_raises_not_replicated(on_replica_set, settings):
    settings.QUEUES_REDIS_WAIT_REPLICAS = "2"
    with pytest.raises(queues.NotReplicated) as caught:
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    assert (caught.value.acknowledged, caught.value.wanted) == (1, 2)


def test_each_thread_reuses_one_pinned_connection(on_replica_set):
    from queues.connection.clients import get_connection

    pinned = replication.pinned_client(get_connection())
    assert replication.pinned_client(get_connection()) is pinned
    queues.enqueue("default", "tests.jobs.sample.add", 0, 0)  # connects what is connected lazily
    before = on_replica_set.master.client().info("stats")["total_connections_received"]
    for i in range(10):
        queues.enqueue("default", "tests.jobs.sample.add", i, 1)
    after = on_replica_set.master.client().info("stats")["total_connections_received"]
    assert after - before == 1  # the INFO client's own connection; the enqueues opened none


def test_enqueues_through_a_limit_key_wait_too(on_replica_set):
    replica = on_replica_set.replicas[0]
    first = queues.enqueue("default", "tests.jobs.sample.add", 1, 2, limit_key="seller:1", limit_concurrency=1)
    held = queues.enqueue("default", "tests.jobs.sample.add", 3, 4, limit_key="seller:1", limit_concurrency=1)
    explicit = queues.enqueue(
        "default", "tests.jobs.sample.add", 5, 6, limit_key="seller:1", limit_concurrency=1, job_id="limited-explicit"
    )
    assert all(job_on(replica, job.id) for job in (first, held, explicit))


def test_a_wait_longer_than_the_socket_timeout_still_ends_in_not_replicated(on_replica_set, settings):
    settings.OPTIMA_QUEUES_OPTIONS = dict(getattr(settings, "OPTIMA_QUEUES_OPTIONS", {}), SOCKET_TIMEOUT=0.2)
    settings.QUEUES_REDIS_WAIT_TIMEOUT_MS = "500"
    replica = on_replica_set.replicas[0]
    replica.process.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(queues.NotReplicated) as caught:
            queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    finally:
        replica.process.send_signal(signal.SIGCONT)
    assert caught.value.acknowledged == 0


@pytest.mark.django_db(transaction=True)
def test_an_outbox_row_whose_push_was_not_replicated_stays_until_the_replicas_have_the_job(on_replica_set):
    """The push wrote the job but raised NotReplicated: the row stays. The next relay finds the job
    already written and deletes the row only once a replica has it (replication.confirm)."""
    from queues.models import OutboxEntry
    from queues.producer import outbox

    replica = on_replica_set.replicas[0]
    replica.process.send_signal(signal.SIGSTOP)
    try:
        job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2, durable=True)  # accepted: no raise
        assert job_on(on_replica_set.master, job.id)
        assert OutboxEntry.objects.get().push_attempts == 1
        assert outbox.relay() == (0, 1)  # found written, not replicated: the row stays
        assert "replica(s) REDIS_WAIT_REPLICAS asks for" in OutboxEntry.objects.get().last_error
    finally:
        replica.process.send_signal(signal.SIGCONT)
    assert outbox.relay() == (1, 0)
    assert not OutboxEntry.objects.exists()
    assert job_on(replica, job.id)
