"""A batch's members live on the default Redis server (queues/producer/joining.py, issue 36): an enqueue of a
queue of another server inside ``queues.batch()`` is refused, naming the queue, the server and the fix."""

import pytest

import queues
from queues.catalog.lookup import get_queue
from tests.jobs import sample

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_batch_member_on_another_server_is_refused_and_nothing_of_it_is_written(second_redis):
    for enqueue in (
        lambda: queues.enqueue("on-b", sample.add, 1, 2),
        lambda: queues.enqueue_many("on-b", sample.add, [(1, 2), (3, 4)]),
    ):
        with pytest.raises(queues.InvalidJob) as excinfo:
            with queues.batch():
                enqueue()
        assert str(excinfo.value).startswith(
            "enqueue('on-b', ...) inside queues.batch(): queue 'on-b' lives on the Redis server 'b', and a batch's "
            "members must live on the default server"
        )
    assert get_queue("on-b").job_ids == []


def test_a_batch_of_the_default_servers_queues_is_unchanged(second_redis):
    with queues.batch() as b:
        job = queues.enqueue("default", sample.add, 1, 2)
    assert job.meta["batch"] == b.id
    assert queues.enqueue("on-b", sample.add, 1, 2).id in get_queue("on-b").job_ids  # outside a batch: fine


def test_a_chain_with_a_step_on_another_server_is_refused_before_anything_runs(second_redis):
    with pytest.raises(queues.InvalidJob, match=r"^enqueue\('on-b', \.\.\.\) inside queues.batch\(\): queue 'on-b'"):
        queues.chain(queues.call("default", sample.add, 1, 2), queues.call("on-b", sample.add, 3, 4))
    assert get_queue("default").job_ids == [] and get_queue("on-b").job_ids == []
