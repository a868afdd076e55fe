"""Debounce and throttle keys (issue 35 §1, queues/producer/dedupe.py): one pending job per key and window."""

import multiprocessing
import re

import pytest

import queues
from queues import conf
from queues.catalog.lookup import get_queue
from queues.exceptions import InvalidJob
from queues.jobs import signing
from queues.keyspace import keys
from tests.support import wait_for
from tests.support.monitor import watched

QUICK = "tests.jobs.lifecycle.quick"
SLEEP = "tests.jobs.lifecycle.sleep"


def scheduled(connection, name="orders-sync"):
    return {
        job_id.decode(): score for job_id, score in connection.zrange(keys.scheduled_key(name), 0, -1, withscores=True)
    }


def test_a_debounced_enqueue_replaces_the_pending_jobs_arguments_and_moves_its_start(queue_redis):
    first = queues.enqueue("orders-sync", QUICK, 1, debounce_key="product-7", debounce_seconds=30)
    first_score = scheduled(queue_redis)[first.id]
    second = queues.enqueue("orders-sync", QUICK, 2, debounce_key="product-7", debounce_seconds=60)
    third = queues.enqueue("orders-sync", QUICK, 3, debounce_key="product-7", debounce_seconds=60)
    assert first.id == second.id == third.id
    assert list(scheduled(queue_redis)) == [first.id]  # one job, nothing queued
    assert get_queue("orders-sync").job_ids == []
    assert scheduled(queue_redis)[first.id] >= first_score + 29  # moved to 60 s from the last enqueue
    stored = queues.fetch_job(first.id)
    assert stored.args == [3]
    assert third.args == [3]
    assert third.get_status(refresh=False) == "scheduled"
    assert stored.description == "tests.jobs.lifecycle.quick(3)"
    assert signing.verify(stored) is True  # re-signed for the pending job's id
    assert stored.meta["due_at"] == scheduled(queue_redis)[first.id]  # the wait histograms' start moved too
    assert stored.signature == third.signature
    key = keys.dedupe_key("orders-sync", "debounce", "product-7")
    assert key.startswith(f"{conf.prefix()}:optima:debounce:")
    assert queue_redis.hget(key, "job").decode() == first.id
    assert 0 < queue_redis.ttl(key) <= 60 + 3600


def test_debounce_max_seconds_bounds_the_wait_from_the_windows_first_enqueue(queue_redis):
    first = queues.enqueue("orders-sync", QUICK, 1, debounce_key="p", debounce_seconds=30, debounce_max_seconds=40)
    key = keys.dedupe_key("orders-sync", "debounce", "p")
    opened = float(queue_redis.hget(key, "first"))
    queue_redis.hset(key, "first", opened - 35)  # as if the window had opened 35 s ago
    last = queues.enqueue("orders-sync", QUICK, 2, debounce_key="p", debounce_seconds=30, debounce_max_seconds=40)
    assert last.id == first.id
    # the window's first enqueue + 40 s (5 s from now), not the last enqueue + 30 s
    assert opened + 4 <= scheduled(queue_redis)[first.id] <= opened + 7


def test_keys_are_per_queue_and_per_key_and_a_throttle_key_is_another_key():
    a = queues.enqueue("orders-sync", QUICK, 1, debounce_key="k1", debounce_seconds=30)
    b = queues.enqueue("orders-sync", QUICK, 1, debounce_key="k2", debounce_seconds=30)
    c = queues.enqueue("default", QUICK, 1, debounce_key="k1", debounce_seconds=30)
    d = queues.enqueue("orders-sync", QUICK, 1, throttle_key="k1", throttle_seconds=30)
    assert len({a.id, b.id, c.id, d.id}) == 4


def test_a_throttled_enqueue_runs_the_first_and_answers_the_others_with_it(queue_redis):
    first = queues.enqueue("orders-sync", QUICK, 1, throttle_key="sync-7", throttle_seconds=30)
    second = queues.enqueue("orders-sync", QUICK, 2, throttle_key="sync-7", throttle_seconds=30)
    assert second.id == first.id
    assert second.args == [1]  # dropped: the job that runs keeps its own arguments
    assert get_queue("orders-sync").job_ids == [first.id]  # queued at once (leading edge)
    key = keys.dedupe_key("orders-sync", "throttle", "sync-7")
    assert 0 < queue_redis.pttl(key) <= 30_000


def test_inside_a_transaction_the_debounced_job_is_written_at_once(queue_redis, transactional_db):
    from django.db import transaction

    with transaction.atomic():
        first = queues.enqueue("orders-sync", QUICK, 1, debounce_key="tx", debounce_seconds=30)
        second = queues.enqueue("orders-sync", QUICK, 2, debounce_key="tx", debounce_seconds=30)
        assert list(scheduled(queue_redis)) == [first.id] == [second.id]


def test_a_job_that_ran_and_waits_for_its_retry_is_not_replaced(queue_redis):
    first = queues.enqueue("orders-sync", QUICK, 1, debounce_key="retrying", debounce_seconds=30)
    queue_redis.hset(keys.job_key(first.id), "started_at", "2026-12-06T00:00:00.000000Z")  # its attempt 1 ran
    second = queues.enqueue("orders-sync", QUICK, 2, debounce_key="retrying", debounce_seconds=30)
    assert second.id != first.id
    assert queues.fetch_job(first.id).args == [1]  # the retry runs what failed
    assert sorted(scheduled(queue_redis)) == sorted([first.id, second.id])


def test_a_planted_key_of_another_type_is_set_aside_and_the_enqueue_goes_through(queue_redis):
    key = keys.dedupe_key("orders-sync", "debounce", "planted")
    queue_redis.set(key, "not a hash")
    first = queues.enqueue("orders-sync", QUICK, 1, debounce_key="planted", debounce_seconds=30)
    second = queues.enqueue("orders-sync", QUICK, 2, debounce_key="planted", debounce_seconds=30)
    assert second.id == first.id
    assert list(scheduled(queue_redis)) == [first.id]
    assert queue_redis.type(key) == b"hash"
    assert queues.fetch_job(first.id).args == [2]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"debounce_key": "k", "debounce_seconds": 0}, "debounce_seconds must be a number of seconds > 0, got int 0"),
        ({"debounce_key": "k", "debounce_seconds": True}, "debounce_seconds must be a number of seconds > 0"),
        ({"debounce_key": "k"}, "debounce needs both debounce_key and debounce_seconds"),
        ({"debounce_seconds": 5}, "debounce needs both debounce_key and debounce_seconds"),
        (
            {"debounce_key": "k", "debounce_seconds": 10, "debounce_max_seconds": 5},
            "debounce_max_seconds=5 is less than debounce_seconds=10",
        ),
        ({"debounce_key": "k", "debounce_seconds": 5, "unique": "u"}, "debounce_key='k' with unique='u'"),
        (
            {"debounce_key": "k", "debounce_seconds": 5, "throttle_key": "k", "throttle_seconds": 5},
            "debounce_key='k' with throttle_key='k'",
        ),
        ({"debounce_key": "k", "debounce_seconds": 5, "durable": True}, "debounce_key='k' with durable=True"),
        ({"debounce_key": "k", "debounce_seconds": 5, "delay": 10}, "debounce_key='k' with delay or at"),
        ({"debounce_key": "k", "debounce_seconds": 5, "job_id": "mine"}, "debounce_key='k' with job_id='mine'"),
        ({"debounce_key": "", "debounce_seconds": 5}, "debounce_key=''"),
        ({"throttle_key": "k", "throttle_seconds": -1}, "throttle_seconds must be a number of seconds > 0, got int -1"),
        ({"throttle_key": "k"}, "throttle needs both throttle_key and throttle_seconds"),
        (
            {"throttle_key": "k", "throttle_seconds": 5, "limit_key": "owner:1", "limit_concurrency": 1},
            "throttle_key='k' with limit_key='owner:1'",
        ),
        (
            {"throttle_key": "k", "throttle_seconds": 5, "limit_key": "owner:1", "limit_rate": "5/s"},
            "throttle_key='k' with limit_key='owner:1'",
        ),
    ],
)
def test_bad_debounce_and_throttle_options_are_refused_naming_the_option(options, message, queue_redis):
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("orders-sync", QUICK, 1, **options)
    assert message in str(caught.value)
    assert queue_redis.keys(f"{conf.prefix()}:*") == []  # nothing written


def _enqueue_many(process, count, start):
    start.wait()
    for i in range(count):
        queues.enqueue("orders-sync", QUICK, f"p{process}-{i}", debounce_key="race", debounce_seconds=120)


def test_200_enqueues_of_one_key_from_8_processes_leave_one_job_with_the_last_applied_arguments(
    queue_redis, admin_redis
):
    job_key_prefix = keys.job_key("").decode() if isinstance(keys.job_key(""), bytes) else keys.job_key("")

    def applied(command):
        return command.startswith(f"HSET {job_key_prefix}") and "description" in command

    # the descriptions Redis wrote into a job hash, in the order it applied them (MONITOR)
    with watched(admin_redis, applied) as commands:
        context = multiprocessing.get_context("fork")
        start = context.Barrier(8)
        processes = [context.Process(target=_enqueue_many, args=(p, 25, start)) for p in range(8)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(120)
        assert [process.exitcode for process in processes] == [0] * 8
    writes = []
    for command in commands:
        found = re.search(r"description \"?tests\.jobs\.lifecycle\.quick\(\\?'(p\d+-\d+)", command)
        writes.append(found.group(1) if found else command)
    jobs = scheduled(queue_redis)
    assert len(jobs) == 1
    assert get_queue("orders-sync").job_ids == []
    (job_id,) = jobs
    job = queues.fetch_job(job_id)
    assert len(writes) == 200  # every enqueue wrote once: 1 window opened, 199 replacements
    assert job.args == [writes[-1]]
    assert signing.verify(job) is True


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_job_that_started_closes_its_window_and_one_pending_job_holds_the_latest_arguments(start_worker, queue_redis):
    running = queues.enqueue("orders-sync", SLEEP, 6, debounce_key="run", debounce_seconds=1)
    start_worker("orders-sync")  # with RQ's scheduler, which moves the job when it is due
    wait_for(lambda: queues.fetch_job(running.id).get_status() == "started", message=f"job {running.id} started")
    nxt = queues.enqueue("orders-sync", SLEEP, 0.1, debounce_key="run", debounce_seconds=4)
    latest = queues.enqueue("orders-sync", SLEEP, 0.2, debounce_key="run", debounce_seconds=4)
    assert queues.fetch_job(running.id).get_status() == "started"  # the window was opened while it ran
    assert nxt.id != running.id
    assert latest.id == nxt.id
    assert list(scheduled(queue_redis)) == [nxt.id]  # one pending job for the key while one runs
    assert get_queue("orders-sync").job_ids == []
    done = wait_for(
        lambda: (lambda j: j if j.get_status() == "finished" else None)(queues.fetch_job(nxt.id)),
        timeout=60,
        message=f"job {nxt.id} finished",
    )
    assert done.return_value() == 0.2  # ran once, with the last arguments
    assert queues.fetch_job(running.id).return_value() == 6


def test_under_inline_a_debounced_enqueue_runs_at_once(queue_redis):
    from queues.testing import inline, inline_result

    with inline():
        job = queues.enqueue("orders-sync", QUICK, 5, debounce_key="inline", debounce_seconds=30)
    assert inline_result(job) == 5
    assert queue_redis.keys(f"{conf.prefix()}:*") == []  # nothing written
