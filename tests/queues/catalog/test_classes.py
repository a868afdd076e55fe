"""queues/catalog/classes.py: OptimaJob reads a job's dates as rq does, without rq's strptime for rq's own form."""

import datetime as dt
import random

import pytest
from rq.utils import str_to_date

import queues
from queues.catalog.classes import DATE_FIELDS, OptimaJob, parse_date
from tests.jobs import sample


def _either(parse, value):
    try:
        return parse(value)
    except ValueError:
        return "ValueError"


def test_a_date_parses_to_what_rq_makes_of_it_whatever_the_text():
    """rq's own form takes the fast way; every other text rq's parse (a ValueError where rq raises one). Checked on
    rq's forms and on thousands of mutations of them (digits, signs, separators, other digits than ASCII's)."""
    samples = [b"2026-12-06T17:00:00.123456Z", "2026-12-06T17:00:00.123456Z", b"2026-12-06T17:00:00Z"]
    samples += ["２026-12-06T17:00:00.123456Z", b"2026-02-30T17:00:00.123456Z", b"2026-12-06T17:00:00,123456Z"]
    rng = random.Random(36)
    for _ in range(5000):
        text = list("2026-12-06T17:00:00.123456Z")
        for _ in range(rng.randint(1, 3)):
            text[rng.randrange(len(text))] = rng.choice("0123456789+-:.TZ ,_٣")
        samples.append("".join(text).encode())
    for value in samples:
        assert _either(parse_date, value) == _either(str_to_date, value), value
    assert parse_date(b"2026-12-06T17:00:00.123456Z") == dt.datetime(2026, 12, 6, 17, 0, 0, 123456, tzinfo=dt.UTC)


@pytest.mark.django_db(transaction=True)
def test_a_job_read_back_has_the_dates_rq_would_give_it(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    raw = queue_redis.hgetall(job.key)
    raw[b"started_at"] = raw[b"last_heartbeat"] = b"2026-12-06T17:00:00.500000Z"
    raw[b"ended_at"] = b"2026-12-06T17:00:01Z"  # rq's older form: rq's own parse
    ours = OptimaJob(job.id, connection=queue_redis)
    ours.restore(dict(raw))
    for name in DATE_FIELDS:
        expected = str_to_date(raw[name.encode()])
        assert getattr(ours, name) == expected and getattr(ours, name).tzinfo is not None, name
    assert ours.func_name == job.func_name and ours.args == job.args


@pytest.mark.django_db(transaction=True)
def test_a_job_without_dates_gets_rqs_defaults_and_a_malformed_one_rqs_error(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    raw = {k: v for k, v in queue_redis.hgetall(job.key).items() if k.decode() not in DATE_FIELDS}
    before = dt.datetime.now(dt.UTC)
    ours = OptimaJob(job.id, connection=queue_redis)
    ours.restore(dict(raw, started_at=b""))
    assert ours.created_at >= before  # rq's now() for a job without one
    assert ours.enqueued_at is None and ours.started_at is None and ours.ended_at is None
    with pytest.raises(ValueError, match="does not match format"):
        OptimaJob(job.id, connection=queue_redis).restore(dict(raw, enqueued_at=b"2026-12-06 17:00:00"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("planted", ["no data", "a zlib bomb"])
@pytest.mark.parametrize("run", ["fork", "no-fork"])
def test_an_entry_planted_in_a_jobs_dependents_is_no_job_and_the_jobs_success_stands(queue_redis, planted, run):
    """rq moves a job's dependents after its success (``Queue.move_dependents_to_ready``), reading them with
    ``OptimaJob.fetch_many``: a hash ``restore`` refuses is no job there (rq 3.0.0's raised, and the job, its success
    written, was retried), and a bomb is never inflated (``entries.TooLarge``)."""
    from queues.catalog.lookup import get_queue
    from queues.keyspace import keys
    from queues.models import DeadLetter
    from queues.worker.adapter import OptimaSimpleWorker
    from tests.support.worker import bomb, plant, run_burst

    good = queues.enqueue("default", sample.add, 2, 3)
    bad = plant(queue_redis, "tests.jobs.sample.add", [1], status="deferred")
    if planted == "no data":
        queue_redis.hdel(keys.job_key(bad), "data")
    else:
        queue_redis.hset(keys.job_key(bad), "data", bomb(20))
    queue_redis.lrem(keys.queue_key("default"), 1, bad)
    queue_redis.sadd(good.dependents_key, bad)
    if run == "fork":
        run_burst(queue_redis)
    else:
        OptimaSimpleWorker([get_queue("default", connection=queue_redis)], connection=queue_redis).work(
            burst=True, with_scheduler=False
        )
    good.refresh()
    assert (good.get_status(), good.return_value()) == ("finished", 5)
    assert queue_redis.hget(keys.job_key(bad), "status") == b"deferred"  # never moved
    assert not DeadLetter.objects.exists()
