"""The RQ scheduler's move of due jobs with a rate (queues/periodic/supervision.py ``move_own_due_jobs``): a
delayed job, a debounced one, or one with a rate and a concurrency, is held by its rate when due, never
pushed straight onto its queue. Real Redis; the move is the scheduler's own call, made here once it holds the
queue's lock (a worker's runs it every second: tests/queues/worker/test_rate.py)."""

import datetime as dt

from rq.registry import ScheduledJobRegistry

import queues
from queues.catalog.lookup import fetch_job, get_queue
from queues.keyspace import keys
from queues.periodic.supervision import ResilientRQScheduler
from queues.producer import limits, rates

JOB = "tests.jobs.lifecycle.quick"
HOUR = dt.timedelta(hours=1)


def move_due(connection, name="default"):
    """What a worker's RQ scheduler does once it holds the queue's lock."""
    scheduler = ResilientRQScheduler([name], connection=connection)
    assert scheduler.acquire_locks() == {name}
    try:
        scheduler.enqueue_scheduled_jobs()
    finally:
        scheduler.release_locks()


def make_due(connection, job_id, name="default"):
    connection.zadd(ScheduledJobRegistry(name, connection=connection).key, {job_id: 0})


def a_period_passed(connection, scoped_key):
    """The key's next token has come (its hour passed): the due release of the scheduler's timer finds it."""
    connection.hset(rates.config_key(scoped_key), "tat", "0")
    connection.zadd(rates.due_key(), {scoped_key: 0})
    rates.release_due(connection)


def held(connection, scoped_key):
    return [i.decode() for i in connection.zrange(rates.held_key(scoped_key), 0, -1)]


def test_a_delayed_job_with_a_rate_is_held_by_its_rate_when_due_and_released_by_its_budget(queue_redis):
    scoped = limits.scoped("default", "seller:d")
    first = queues.enqueue("default", JOB, 1, limit_key="seller:d", limit_rate="1/hour")
    later = queues.enqueue("default", JOB, 2, limit_key="seller:d", limit_rate="1/hour", delay=HOUR)
    assert get_queue("default").job_ids == [first.id]  # the hour's one start
    assert fetch_job(later.id).get_status() == "scheduled"
    assert held(queue_redis, scoped) == []  # scheduled as any delayed job: its rate is charged when due

    make_due(queue_redis, later.id)
    move_due(queue_redis)
    assert get_queue("default").job_ids == [first.id]  # not pushed: the key's budget is spent
    assert held(queue_redis, scoped) == [later.id]
    assert later.id not in ScheduledJobRegistry("default", connection=queue_redis)
    assert queues.job_state(later.id).state == "held"

    a_period_passed(queue_redis, scoped)
    assert get_queue("default").job_ids == [first.id, later.id]
    assert fetch_job(later.id).get_status() == "queued"


def test_a_delayed_job_with_a_rate_and_a_concurrency_goes_through_both_when_due(queue_redis):
    options = {"limit_key": "seller:dc", "limit_rate": "1/hour", "limit_concurrency": 1}
    scoped = limits.scoped("default", "seller:dc")
    later = queues.enqueue("default", JOB, 1, delay=HOUR, **options)
    make_due(queue_redis, later.id)
    move_due(queue_redis)
    assert get_queue("default").job_ids == [later.id]  # the budget's first token, then a free slot
    assert queue_redis.zrange(keys.limit_allowed_key(scoped), 0, -1) == [later.id.encode()]

    again = queues.enqueue("default", JOB, 2, delay=HOUR, **options)
    make_due(queue_redis, again.id)
    move_due(queue_redis)  # rq's own move would hand it to the concurrency alone: held there, not by the rate
    assert held(queue_redis, scoped) == [again.id]
    assert queue_redis.zcard(keys.limit_held_key(scoped)) == 0


def test_a_debounced_job_with_a_rate_is_held_by_its_rate_when_due_and_its_window_then_closes(queue_redis):
    scoped = limits.scoped("default", "seller:db")
    options = {"debounce_key": "product-9", "debounce_seconds": 3600, "limit_key": "seller:db", "limit_rate": "1/hour"}
    spent = queues.enqueue("default", JOB, 0, limit_key="seller:db", limit_rate="1/hour")
    first = queues.enqueue("default", JOB, 1, **options)
    last = queues.enqueue("default", JOB, 2, **options)
    assert first.id == last.id  # one job for the window
    assert fetch_job(first.id).meta[rates.META] == {"key": scoped, "count": 1, "seconds": 3600.0}

    make_due(queue_redis, first.id)
    move_due(queue_redis)
    assert held(queue_redis, scoped) == [first.id]
    assert get_queue("default").job_ids == [spent.id]
    # It left the scheduled registry (into its rate's hold): the window closed, a new enqueue opens the next.
    nxt = queues.enqueue("default", JOB, 3, **options)
    assert nxt.id != first.id

    a_period_passed(queue_redis, scoped)
    assert get_queue("default").job_ids == [spent.id, first.id]
    assert fetch_job(first.id).args == [2]  # runs once, with the window's last arguments
