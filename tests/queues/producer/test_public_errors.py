"""The public API raises only its own exceptions: a Redis that does not answer is ``QueueUnavailable``, never a
redis exception, from every public function that reads or writes Redis (features catch nothing else)."""

import pytest

import queues
from tests.jobs import sample

pytestmark = pytest.mark.django_db(transaction=True)

DOWN = "redis://someone:hunter2-secret@127.0.0.1:1/0"  # port 1: connection refused at once

CALLS = {
    "enqueue": lambda: queues.enqueue("default", sample.add, 1, 2),
    "enqueue unique": lambda: queues.enqueue("default", sample.add, 1, 2, unique="one", durable=True),
    "enqueue_call": lambda: queues.enqueue_call("default", sample.add, args=[1, 2]),
    "enqueue_many": lambda: queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)]),
    "job_state": lambda: queues.job_state("no-such-job"),
    "cancel": lambda: queues.cancel("no-such-job"),
    "search_jobs": lambda: queues.search_jobs(queue="default"),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_redis_that_does_not_answer_is_queue_unavailable_with_its_password_masked(settings, name):
    settings.QUEUES_REDIS_URL = DOWN
    with pytest.raises(queues.QueueUnavailable) as caught:
        CALLS[name]()
    assert "hunter2" not in str(caught.value)
    assert "unavailable" in str(caught.value)


def test_the_guarded_names_are_still_the_functions_they_wrap():
    from queues.producer import api

    assert queues.enqueue.__wrapped__ is api.enqueue
    assert queues.enqueue.__name__ == "enqueue" and queues.enqueue.__doc__ == api.enqueue.__doc__
