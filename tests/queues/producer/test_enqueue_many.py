"""``queues.enqueue_many``: many jobs of one declared function, signed, in one write; all or nothing."""

import datetime as dt

import pytest
from django.db import transaction
from rq.job import JobStatus
from rq.registry import ScheduledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.exceptions import InvalidJob
from queues.jobs import signing
from queues.keyspace import keys
from queues.models import DeadLetter, OutboxEntry
from tests.jobs import sample
from tests.session_env import PREFIX
from tests.support import wait_for


def job_keys(admin_redis):
    return sorted(k.decode() for k in admin_redis.scan_iter(match=f"{PREFIX}:job:*"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_batch_is_signed_queued_in_order_and_run_by_a_fork_free_worker(start_worker, queue_redis):
    jobs = queues.enqueue_many("default", sample.add, [(1, 2), [3, 4], queues.Call(args=[5], kwargs={"b": 6})])
    assert get_queue("default").job_ids == [job.id for job in jobs]
    stored = [OptimaJob.fetch(job.id, connection=queue_redis) for job in jobs]
    assert [signing.verify(job) for job in stored] == [True, True, True]  # what the worker's gate checks
    worker = start_worker("default", "--no-fork", "--burst")
    assert worker.wait(60) == 0, worker.output()
    assert [OptimaJob.fetch(job.id, connection=queue_redis).return_value() for job in jobs] == [3, 7, 11]
    assert DeadLetter.objects.count() == 0


def test_a_batch_of_a_hundred_jobs_is_one_round_trip(redis_sends):
    queues.enqueue_many("default", sample.add, [(0, 0)])  # the queue object and the server's version, once
    before = redis_sends()
    jobs = queues.enqueue_many("default", sample.add, [(i, i) for i in range(100)])
    assert redis_sends(before) == 1
    assert len(get_queue("default").job_ids) == 101 and len({job.id for job in jobs}) == 100


def test_a_single_enqueue_is_one_round_trip(redis_sends):
    queues.enqueue("default", sample.add, 0, 0)
    before = redis_sends()
    queues.enqueue("default", sample.add, 1, 2)
    assert redis_sends(before) == 1


@pytest.mark.parametrize(
    "bad, expected",
    [
        ((1, dt.datetime(2026, 1, 1)), "calls[2]: argument 1 (positional) is of type datetime"),
        ({"a": 1}, "calls[2] is a dict {'a': 1}: one positional argument, or keyword arguments?"),
        (7, "calls[2] is int 7; each item is a tuple of the job's positional arguments or a queues.Call"),
        (queues.Call(args=[1], kwargs={"b": {1, 2}}), "calls[2]: argument 'b' (keyword) is of type set"),
        (
            queues.Call(args=[1, 2], job_id="a:b"),
            "calls[2]: job_id must be a non-empty string of letters, digits, '_' and '-'",
        ),
        (queues.Call(args=[1, 2], job_id="twice"), "calls[2] has job_id='twice', as calls[1] has"),
        (queues.Call(args=[1, 2], meta=["x"]), "calls[2]: meta must be a dict, got list"),
    ],
)
def test_a_bad_item_fails_the_whole_batch_naming_its_index_and_nothing_is_written(bad, expected, admin_redis):
    calls = [(1, 2), queues.Call(args=[3, 4], job_id="twice"), bad, (5, 6)]
    with pytest.raises(InvalidJob) as excinfo:
        queues.enqueue_many("default", sample.add, calls)
    assert str(excinfo.value).startswith(expected), str(excinfo.value)
    assert job_keys(admin_redis) == []


def test_an_id_that_exists_in_redis_fails_the_batch_and_nothing_of_it_is_written():
    first = queues.enqueue("default", sample.add, 1, 2, job_id="taken")
    with pytest.raises(InvalidJob, match="'?taken'?.*nothing of the batch was written"):
        queues.enqueue_many("default", sample.add, [(1, 1), queues.Call(args=[2, 2], job_id="taken"), (3, 3)])
    assert get_queue("default").job_ids == [first.id]
    assert OptimaJob.fetch("taken", connection=get_queue("default").connection).args == [1, 2]


def test_unique_is_refused_and_the_options_are_the_batchs(queue_redis):
    with pytest.raises(InvalidJob, match=r"enqueue_many does not take unique= .*queues.enqueue\(..., unique=<key>\)"):
        queues.enqueue_many("default", sample.add, [(1, 2)], unique="k")
    jobs = queues.enqueue_many(
        "default",
        sample.add,
        [(1, 2), queues.Call(args=[3, 4], meta={"note": "own"})],
        attempts=2,
        timeout=7,
        priority=5,
        meta={"note": "all", "owner": "u1"},
    )
    assert queue_redis.lrange(keys.band_key(get_queue("default").key, "high"), 0, -1) == [j.id.encode() for j in jobs]
    stored = [OptimaJob.fetch(job.id, connection=queue_redis) for job in jobs]
    assert [(j.timeout, j.meta["attempts_allowed"], j.meta["priority"]) for j in stored] == [(7, 2, 5), (7, 2, 5)]
    assert [(j.meta["note"], j.meta["owner"]) for j in stored] == [("all", "u1"), ("own", "u1")]


def test_a_delayed_batch_is_scheduled_and_a_limited_one_held_beyond_its_concurrency(queue_redis):
    delayed = queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)], delay=60)
    registry = ScheduledJobRegistry("default", connection=queue_redis)
    assert sorted(registry.get_job_ids()) == sorted(job.id for job in delayed)
    limited = queues.enqueue_many(
        "default", sample.add, [(i, i) for i in range(4)], limit_key="seller:1", limit_concurrency=2
    )
    statuses = [OptimaJob.fetch(job.id, connection=queue_redis).get_status() for job in limited]
    assert statuses == [JobStatus.QUEUED] * 2 + [JobStatus.RATE_LIMITED] * 2
    assert get_queue("default").job_ids == [job.id for job in limited[:2]]


@pytest.mark.django_db(transaction=True)
def test_inside_a_transaction_the_batch_is_one_row_per_job_until_the_commit_then_in_redis():
    queue = get_queue("default")
    with transaction.atomic():
        jobs = queues.enqueue_many("default", sample.add, [(1, 2), (3, 4), (5, 6)])
        assert list(OutboxEntry.objects.values_list("job_id", flat=True)) == [job.id for job in jobs]
        assert queue.job_ids == []
    assert queue.job_ids == [job.id for job in jobs]
    assert OutboxEntry.objects.count() == 0
    assert all(signing.verify(OptimaJob.fetch(job.id, connection=queue.connection)) for job in jobs)


@pytest.mark.django_db(transaction=True)
def test_a_rollback_leaves_no_row_and_no_job(admin_redis):
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)])
        raise ZeroDivisionError("the transaction rolls back")
    assert OutboxEntry.objects.count() == 0
    assert job_keys(admin_redis) == []


@pytest.mark.django_db(transaction=True)
def test_a_durable_batch_whose_redis_is_down_stays_in_the_outbox_and_the_relay_pushes_it(settings):
    from queues.producer import outbox

    up = settings.QUEUES_REDIS_URL
    settings.QUEUES_REDIS_URL = "redis://127.0.0.1:1/0"  # connection refused at once
    jobs = queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)], durable=True)
    assert OutboxEntry.objects.filter(claimed_by="").count() == 2  # let go at once: the relay's
    settings.QUEUES_REDIS_URL = up
    assert outbox.relay_all() == (2, 0)
    assert get_queue("default").job_ids == [job.id for job in jobs]
    wait_for(lambda: OutboxEntry.objects.count() == 0, timeout=5, message="the rows to be deleted")


@pytest.mark.django_db(transaction=True)
def test_after_the_commit_an_id_taken_meanwhile_drops_only_its_own_row_and_the_rest_is_written(queue_redis):
    other = queues.enqueue("default", sample.add, 9, 9)
    with transaction.atomic():
        jobs = queues.enqueue_many("default", sample.add, [(1, 1), queues.Call(args=[2, 2], job_id="taken"), (3, 3)])
        queue_redis.rename(keys.job_key(other.id), keys.job_key("taken"))  # another job now holds the id
    assert get_queue("default").job_ids == [other.id, jobs[0].id, jobs[2].id]
    assert OutboxEntry.objects.count() == 0
    assert OptimaJob.fetch("taken", connection=queue_redis).args == [9, 9]  # not overwritten
