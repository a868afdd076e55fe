"""``optima_batches{queue, state}`` (issue 34): batches by the queue of their callback and state."""

import pytest

import queues
from queues.keyspace import keys
from queues.metrics import collector
from tests.support.metrics import samples, scrape
from tests.support.worker import run_burst

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fresh_scrapes(settings):
    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_CACHE_SECONDS": 0}
    collector.cache.clear()
    yield
    collector.cache.clear()


def batches(client, queue):
    found = samples(scrape(client))
    return {state: found[("optima_batches", frozenset({("queue", queue), ("state", state)}))] for state in STATES}


STATES = ("open", "running", "succeeded", "completed_with_dead", "canceled")


def test_batches_are_counted_by_the_queue_of_their_callback_and_state(client, queue_redis, tmp_path):
    queue_redis.delete(keys.batches_key())
    record = str(tmp_path / "runs.txt")
    with queues.batch(on_complete=queues.call("content", "tests.jobs.batches.callback", record, "complete")) as open_:
        queues.enqueue("default", "tests.jobs.batches.member", record, 1)
        assert batches(client, "content") == dict.fromkeys(STATES, 0.0) | {"open": 1.0}
    assert batches(client, "content") == dict.fromkeys(STATES, 0.0) | {"running": 1.0}
    run_burst(queue_redis, "default")
    assert batches(client, "content") == dict.fromkeys(STATES, 0.0) | {"succeeded": 1.0}
    with queues.batch() as b:
        queues.enqueue("default", "tests.jobs.batches.member", record, 2)
    queues.cancel_batch(b.id)
    assert batches(client, "(none)") == dict.fromkeys(STATES, 0.0) | {"canceled": 1.0}
    assert open_.id != b.id


def test_planted_batch_counts_are_left_out_and_the_rest_is_served(client, queue_redis):
    queue_redis.delete(keys.batches_key())
    queue_redis.hset(keys.batches_key(), mapping={"default|running": 2, "job-1|open": 5, "default|open": "NaN"})
    found = samples(scrape(client))
    assert found[("optima_batches", frozenset({("queue", "default"), ("state", "running")}))] == 2.0
    assert found[("optima_batches", frozenset({("queue", "default"), ("state", "open")}))] == 0.0
    assert not [k for k in found if k[0] == "optima_batches" and ("queue", "job-1") in k[1]]
