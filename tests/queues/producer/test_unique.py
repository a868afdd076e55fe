"""Unique jobs: one waiting job per (queue, key); the second enqueue gets the waiting one back."""

import threading

import pytest
from django.db import transaction

import queues
from queues.catalog.lookup import get_queue


def test_a_second_enqueue_while_the_first_waits_returns_the_waiting_job():
    first = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
    second = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 2, unique="cabinet-42")
    assert second.id == first.id
    assert second.args == [1]
    assert get_queue("orders-sync").job_ids == [first.id]


def test_a_delayed_job_counts_as_waiting():
    first = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42", delay=60)
    second = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
    assert second.id == first.id
    assert get_queue("orders-sync").job_ids == []


def test_keys_are_per_queue_and_per_key():
    a = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-1")
    b = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-2")
    c = queues.enqueue("default", "tests.jobs.lifecycle.quick", 1, unique="cabinet-1")
    assert len({a.id, b.id, c.id}) == 3


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_once_the_job_has_run_the_next_enqueue_creates_a_new_job(start_worker):
    first = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
    assert start_worker("orders-sync", "--burst").wait(60) == 0
    assert first.get_status(refresh=True) == "finished"
    second = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
    assert second.id != first.id
    assert get_queue("orders-sync").job_ids == [second.id]


@pytest.mark.django_db(transaction=True)
def test_two_enqueues_of_one_key_in_one_transaction_write_one_job():
    with transaction.atomic():
        first = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
        queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 2, unique="cabinet-42")
    assert get_queue("orders-sync").job_ids == [first.id]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_enqueue_does_not_hold_the_key():
    with pytest.raises(RuntimeError), transaction.atomic():
        queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
        raise RuntimeError("rollback")
    job = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42")
    assert get_queue("orders-sync").job_ids == [job.id]


def test_concurrent_enqueues_of_one_key_leave_exactly_one_waiting_job():
    barrier = threading.Barrier(8)
    returned = []

    def enqueue():
        barrier.wait()
        returned.append(queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-42").id)

    threads = [threading.Thread(target=enqueue) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    waiting = get_queue("orders-sync").job_ids
    assert len(waiting) == 1
    assert set(returned) == set(waiting)
