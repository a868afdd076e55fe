"""A job found by its id alone, whatever Redis server its queue lives on (queues/catalog/lookup.py, issue 36):
``queues.fetch_job``, ``queues.job_state`` and ``queues.cancel`` on two real redis-servers."""

import pytest

import queues
from queues.catalog.lookup import get_queue, job_connection
from queues.connection import clients
from tests.jobs import sample


def test_fetch_job_finds_a_job_on_either_server(second_redis):
    on_b = queues.enqueue("on-b", sample.add, 1, 2)
    on_default = queues.enqueue("default", sample.add, 3, 4)
    assert (queues.fetch_job(on_b.id).args, queues.fetch_job(on_b.id).origin) == ([1, 2], "on-b")
    assert queues.fetch_job(on_default.id).origin == "default"
    assert queues.fetch_job("no-such-job") is None
    assert job_connection(on_b.id) is clients.get_connection("b")
    assert job_connection(on_default.id) is clients.get_connection()


@pytest.mark.django_db(transaction=True)  # both read the outbox first
def test_a_job_state_and_a_cancel_reach_the_jobs_own_server(second_redis):
    job = queues.enqueue("on-b", sample.add, 1, 2)
    assert (queues.job_state(job.id).state, queues.job_state(job.id).queue) == ("queued", "on-b")
    assert queues.cancel(job.id).ok
    assert queues.job_state(job.id).state == "canceled"
    assert get_queue("on-b").job_ids == []


def test_a_server_down_hides_only_its_own_jobs(second_redis):
    on_b = queues.enqueue("on-b", sample.add, 1, 2)
    on_default = queues.enqueue("default", sample.add, 3, 4)
    second_redis.stop()
    assert queues.fetch_job(on_default.id).id == on_default.id
    with pytest.raises(queues.QueueUnavailable, match=f"127.0.0.1:{second_redis.port}"):
        queues.fetch_job(on_b.id)
