"""The public enqueue API: validation before any write, JSON only, transactions, delays."""

import datetime as dt
import decimal

import pytest
from django.db import transaction
from django.utils import timezone
from rq.registry import ScheduledJobRegistry

import queues
from queues.catalog.lookup import get_queue
from queues.exceptions import InvalidJob, UnknownQueue
from tests.jobs import sample


def queue_keys(admin_redis, prefix):
    return sorted(k.decode() for k in admin_redis.scan_iter(match=f"{prefix}:*"))


def test_enqueue_accepts_a_callable_and_returns_the_job_with_its_id():
    job = queues.enqueue("default", sample.add, 1, 2)
    assert isinstance(job.id, str) and len(job.id) == 32
    assert get_queue("default").job_ids == [job.id]
    assert job.func_name == "tests.jobs.sample.add"
    assert job.args == [1, 2]


def test_enqueue_accepts_a_dotted_path():
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, b=2)
    assert job.kwargs == {"b": 2}


def test_enqueue_call_passes_job_kwargs_named_like_reserved_options():
    job = queues.enqueue_call("default", "tests.jobs.sample.add", args=[1], kwargs={"timeout": 3, "delay": 4})
    assert job.kwargs == {"timeout": 3, "delay": 4}
    assert get_queue("default").job_ids == [job.id]


def test_unknown_queue_names_the_declared_queues():
    with pytest.raises(UnknownQueue) as excinfo:
        queues.enqueue("ordres-sync", sample.add, 1, 2)
    message = str(excinfo.value)
    assert "'ordres-sync'" in message
    assert "'default'" in message and "'orders-sync'" in message


def test_get_queue_of_unknown_name_raises_unknown_queue():
    with pytest.raises(UnknownQueue):
        queues.get_queue("nope")


@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        ((1, dt.datetime(2026, 1, 1)), {}, "argument 1 (positional) is of type datetime"),
        ((), {"price": decimal.Decimal("1.5")}, "argument 'price' (keyword) is of type Decimal"),
        (([1, {2}],), {}, "argument 0 (positional)[1] is of type set"),
        (({1: "a"},), {}, "has a key 1 of type int"),
        ((float("nan"),), {}, "argument 0 (positional) is nan"),
    ],
)
def test_non_json_argument_is_refused_naming_position_and_type_and_nothing_is_written(
    args, kwargs, expected, admin_redis
):
    from tests.session_env import PREFIX

    with pytest.raises(InvalidJob) as excinfo:
        queues.enqueue("default", sample.add, *args, **kwargs)
    assert expected in str(excinfo.value)
    assert queue_keys(admin_redis, PREFIX) == []


def test_lambda_is_refused_with_a_hint():
    with pytest.raises(InvalidJob, match="module-level function"):
        queues.enqueue("default", lambda: None)


def test_unimportable_dotted_path_is_refused():
    with pytest.raises(InvalidJob, match="is not a declared job: decorate a module-level function"):
        queues.enqueue("default", "tests.jobs.sample.does_not_exist")


@pytest.mark.parametrize("attempts", [0, -1, 1.5, "3", True])
def test_bad_attempts_override_is_refused_naming_the_value(attempts):
    with pytest.raises(InvalidJob) as excinfo:
        queues.enqueue("default", sample.add, 1, 2, attempts=attempts)
    assert "['attempts'] must be an integer >= 1" in str(excinfo.value)
    assert repr(attempts) in str(excinfo.value)


def test_attempts_override_is_stored_on_the_job():
    job = queues.enqueue("default", sample.add, 1, 2, attempts=1)
    assert job.meta["attempts_allowed"] == 1
    job2 = queues.enqueue("repricer", sample.add, 1, 2)
    assert job2.meta["attempts_allowed"] == 1
    job3 = queues.enqueue("default", sample.add, 1, 2)
    assert job3.meta["attempts_allowed"] == 5


def test_timeout_default_comes_from_the_queue_declaration():
    assert queues.enqueue("content", sample.add, 1, 2).timeout == 600
    assert queues.enqueue("default", sample.add, 1, 2, timeout=7).timeout == 7


def test_delay_in_seconds_schedules_the_job():
    before = timezone.now()
    job = queues.enqueue("default", sample.add, 1, 2, delay=30)
    registry = ScheduledJobRegistry(queue=get_queue("default"))
    assert registry.get_job_ids() == [job.id]
    when = registry.get_scheduled_time(job.id)
    assert dt.timedelta(seconds=29) <= when - before <= dt.timedelta(seconds=31)
    assert get_queue("default").job_ids == []


def test_delay_as_timedelta_and_at_as_aware_datetime_schedule_the_job():
    job1 = queues.enqueue("default", sample.add, 1, 2, delay=dt.timedelta(minutes=1))
    at = timezone.now() + dt.timedelta(hours=1)
    job2 = queues.enqueue("default", sample.add, 1, 2, at=at)
    registry = ScheduledJobRegistry(queue=get_queue("default"))
    assert sorted(registry.get_job_ids()) == sorted([job1.id, job2.id])
    assert abs((registry.get_scheduled_time(job2.id) - at).total_seconds()) < 1


def test_naive_at_and_both_delay_and_at_are_refused():
    with pytest.raises(InvalidJob, match="naive datetime"):
        queues.enqueue("default", sample.add, 1, 2, at=dt.datetime(2030, 1, 1))
    with pytest.raises(InvalidJob, match="not both"):
        queues.enqueue("default", sample.add, 1, 2, delay=1, at=timezone.now())
    with pytest.raises(InvalidJob, match="delay must be"):
        queues.enqueue("default", sample.add, 1, 2, delay="soon")


def test_explicit_job_id_is_used_and_a_duplicate_is_refused():
    job = queues.enqueue("default", sample.add, 1, 2, job_id="sync-42")
    assert job.id == "sync-42"
    with pytest.raises(InvalidJob, match="already exists"):
        queues.enqueue("default", sample.add, 1, 2, job_id="sync-42")


@pytest.mark.django_db(transaction=True)
def test_enqueue_inside_a_transaction_waits_for_the_commit_but_returns_the_id_at_once():
    queue = get_queue("default")
    with transaction.atomic():
        job = queues.enqueue("default", sample.add, 1, 2)
        delayed = queues.enqueue("default", sample.add, 1, 2, delay=60)
        assert job.id and delayed.id
        assert queue.job_ids == []
        assert ScheduledJobRegistry(queue=queue).get_job_ids() == []
    assert queue.job_ids == [job.id]
    assert ScheduledJobRegistry(queue=queue).get_job_ids() == [delayed.id]


@pytest.mark.django_db(transaction=True)
def test_rollback_enqueues_nothing_delayed_jobs_included(admin_redis):
    from tests.session_env import PREFIX

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with transaction.atomic():
            queues.enqueue("default", sample.add, 1, 2)
            queues.enqueue("default", sample.add, 1, 2, delay=60)
            raise Boom
    assert queue_keys(admin_redis, PREFIX) == []


def test_fetch_job_finds_a_job_of_any_queue_and_none_for_an_unknown_id():
    job = queues.enqueue("content", sample.add, 1, 2)
    fetched = queues.fetch_job(job.id)
    assert (fetched.id, fetched.origin, fetched.args) == (job.id, "content", [1, 2])
    assert queues.fetch_job("no-such-job") is None
