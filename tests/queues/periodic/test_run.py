"""A periodic run of a queue on another Redis server (queues/periodic/run.py, issue 36): the one scheduler of the
default server enqueues each run on its queue's server, once per tick."""

import datetime as dt

import redis

from queues.catalog.lookup import get_queue
from queues.keyspace import keys
from queues.periodic.declare import Schedule
from queues.periodic.run import run_schedule


def test_a_run_of_a_schedule_on_server_b_is_enqueued_on_b_once(second_redis, queue_redis):
    schedule = Schedule(id="b-tick", queue="on-b", func="tests.jobs.lifecycle.quick", args=(1,), interval=60)
    when = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)
    run = run_schedule(schedule, when)
    assert run_schedule(schedule, when) is None  # a second scheduler on the same tick: b says it exists
    assert get_queue("on-b").job_ids == [run.id]
    b = redis.Redis.from_url(second_redis.url)
    assert b.hget(run.key, "origin") == b"on-b" and queue_redis.exists(run.key) == 0
    assert queue_redis.get(keys.schedule_last_key("b-tick")) == run.id.encode()  # for the panel, by the scheduler
