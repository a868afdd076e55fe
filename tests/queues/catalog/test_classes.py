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
