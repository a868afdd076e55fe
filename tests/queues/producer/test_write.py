"""Where an enqueue writes (queues/producer/write.py): on the Redis server its queue lives on (issue 36).

Two real redis-servers: the session's (the default server) and ``second_redis``'s (server ``b``, with the
queues ``on-b`` and ``on-b-2``).
"""

import datetime as dt

import pytest
import redis
from rq.registry import ScheduledJobRegistry

import queues
from queues.catalog.lookup import get_queue
from queues.connection import clients
from tests.jobs import sample


def _keys_of(client, job_id):
    return sorted(k.decode() for k in client.scan_iter(match=f"*{job_id}*"))


def test_a_job_of_a_queue_on_server_b_is_written_on_b_and_nowhere_else(second_redis, queue_redis):
    on_b = queues.enqueue("on-b", sample.add, 1, 2)
    on_default = queues.enqueue("default", sample.add, 3, 4)
    b = redis.Redis.from_url(second_redis.url)
    assert get_queue("on-b").connection is clients.get_connection("b")
    assert get_queue("on-b").job_ids == [on_b.id]
    assert b.exists(on_b.key) == 1 and queue_redis.exists(on_b.key) == 0
    assert _keys_of(queue_redis, on_b.id) == []
    assert queue_redis.exists(on_default.key) == 1 and b.exists(on_default.key) == 0
    assert get_queue("default").job_ids == [on_default.id]
    assert queues.enqueue("on-b", sample.add, 5, 6).connection.connection_pool.connection_kwargs["port"] == (
        second_redis.port
    )


def test_a_delayed_job_waits_in_its_servers_scheduled_registry(second_redis, queue_redis):
    job = queues.enqueue("on-b", sample.add, 1, 2, delay=dt.timedelta(minutes=5))
    b_queue = get_queue("on-b")
    assert ScheduledJobRegistry(queue=b_queue).get_job_ids() == [job.id]
    assert b_queue.job_ids == []
    assert queue_redis.exists(job.key) == 0
    assert redis.Redis.from_url(second_redis.url).hget(job.key, "status") == b"scheduled"


def test_enqueue_many_writes_the_batch_on_its_queues_server(second_redis, queue_redis):
    jobs = queues.enqueue_many("on-b", sample.add, [(1, 2), (3, 4), (5, 6)])
    assert sorted(get_queue("on-b").job_ids) == sorted(job.id for job in jobs)
    assert [queue_redis.exists(job.key) for job in jobs] == [0, 0, 0]


def test_server_b_down_fails_its_enqueues_naming_it_while_the_default_servers_go_on(second_redis):
    second_redis.stop()
    with pytest.raises(queues.QueueUnavailable) as excinfo:
        queues.enqueue("on-b", sample.add, 1, 2)
    assert f"127.0.0.1:{second_redis.port}" in str(excinfo.value)
    assert "REDIS_SERVERS['b'] (setting QUEUES_REDIS_SERVERS) is right" in str(excinfo.value)
    job = queues.enqueue("default", sample.add, 1, 2)
    assert get_queue("default").job_ids == [job.id]
    second_redis.start()
    job_b = queues.enqueue("on-b", sample.add, 1, 2)
    assert get_queue("on-b").job_ids == [job_b.id]


def test_rqs_set_of_queues_is_written_once_a_minute_from_a_process_to_each_redis(private_redis, monkeypatch):
    """rq SADDs the queue into ``<prefix>:queues`` with every enqueue; ``write.queue_set_into`` once a minute a queue
    and Redis (issue 36: a command a job fewer). A Redis reached anew (here: the test's own server, its own client
    pool) gets it with its first job, and past the minute it is written again."""
    from rq.queue import Queue

    from queues.producer import write

    connection = clients.get_connection()

    def sadds():
        return connection.info("commandstats").get("cmdstat_sadd", {}).get("calls", 0)

    first = queues.enqueue("default", sample.add, 1, 2)
    assert connection.smembers(Queue.redis_queues_keys) == {get_queue("default").key.encode()}
    before = sadds()
    queues.enqueue("default", sample.add, 3, 4)
    queues.enqueue_many("default", sample.add, [(5, 6), (7, 8)])
    assert sadds() == before
    connection.srem(Queue.redis_queues_keys, get_queue("default").key)  # the panel's delete of the queue, say
    monkeypatch.setattr(write, "QUEUE_SET_EVERY_SECONDS", 0.0)  # the minute gone by
    queues.enqueue("default", sample.add, 9, 10)
    assert sadds() == before + 1
    assert connection.smembers(Queue.redis_queues_keys) == {get_queue("default").key.encode()}
    assert first.connection.connection_pool is connection.connection_pool
