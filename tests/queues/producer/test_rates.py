"""Rate limits per key (queues/producer/rates.py): a key's jobs beyond its budget are held, released by its
budget; a paused key keeps them held. Real Redis, no worker (the release on the scheduler's timer is driven
through ``rates.release_due``, which the scheduler's ``rates.wait`` calls; real workers in
tests/queues/worker/test_rate.py)."""

import pytest
from rq.job import JobStatus
from rq.rate_limit import RateLimitRegistry, release_slot

import queues
from queues.board.limits import overview
from queues.catalog.lookup import fetch_job, get_queue
from queues.exceptions import InvalidJob
from queues.keyspace import keys
from queues.producer import limits, rates
from queues.producer.cancel import cancel_job
from queues.producer.rates import Rate

JOB = "tests.jobs.lifecycle.quick"


def status(job):
    return fetch_job(job.id).get_status()


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("10/s", Rate(10, 1.0)),
        ("10/second", Rate(10, 1.0)),
        ("5/min", Rate(5, 60.0)),
        ("5 per minute", Rate(5, 60.0)),
        ("3/hour", Rate(3, 3600.0)),
        ("2/3 seconds", Rate(2, 3.0)),
    ],
)
def test_a_rate_is_read_in_the_limits_syntax_and_its_short_form(text, rate):
    assert rates.parse(text) == rate


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"limit_key": "seller:1", "limit_rate": "0/s"}, "limit_rate='0/s' must allow at least 1 job per period"),
        ({"limit_key": "seller:1", "limit_rate": "10/day"}, "limit_rate='10/day' has the unknown period 'day'"),
        ({"limit_key": "seller:1", "limit_rate": 10}, "limit_rate=10 must be a string such as '10/s', not int"),
        ({"limit_rate": "10/s"}, "limit_rate='10/s' without a limit_key"),
        ({"limit_key": "seller:1", "limit_rate": "10/s", "priority": 1}, "priority=1 with limit_rate"),
    ],
)
def test_a_bad_rate_is_refused_naming_the_argument_the_value_and_the_fix(options, says):
    with pytest.raises(InvalidJob) as refused:
        queues.enqueue("default", JOB, 1, **options)
    assert str(refused.value).startswith(says)


def test_jobs_beyond_the_budget_are_held_outside_the_queue_and_released_by_it_while_other_keys_pass(queue_redis):
    a = [queues.enqueue("default", JOB, i, limit_key="seller:a", limit_rate="2/hour") for i in range(3)]
    b = queues.enqueue("default", JOB, 9, limit_key="seller:b", limit_rate="2/hour")
    assert get_queue("default").job_ids == [a[0].id, a[1].id, b.id]  # one step of tolerance: 2 at once
    assert [status(j) for j in a] == [JobStatus.QUEUED, JobStatus.QUEUED, JobStatus.RATE_LIMITED]
    due = queue_redis.zscore(rates.due_key(), limits.scoped("default", "seller:a"))
    seconds, micro = queue_redis.time()
    assert 1790 < due - (seconds + micro / 1e6) <= 1800  # the next token: period/N after the first release
    assert rates.release_due(queue_redis) > 1790  # nothing due yet: the scheduler sleeps until then
    assert status(a[2]) == JobStatus.RATE_LIMITED

    queue_redis.hset(rates.config_key(limits.scoped("default", "seller:a")), "tat", "0")  # the hour has passed
    queue_redis.zadd(rates.due_key(), {limits.scoped("default", "seller:a"): 0})
    rates.release_due(queue_redis)
    assert status(a[2]) == JobStatus.QUEUED
    assert get_queue("default").job_ids[-1] == a[2].id


def test_a_paused_key_keeps_its_jobs_held_and_a_resume_releases_what_its_budget_allows(queue_redis):
    rates.pause(queue_redis, "default", "seller:p")
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:p", limit_rate="2/hour") for i in range(3)]
    other = queues.enqueue("default", JOB, 9)
    assert get_queue("default").job_ids == [other.id]
    assert [status(j) for j in jobs] == [JobStatus.RATE_LIMITED] * 3
    [state] = overview(queue_redis)
    assert (state.key, state.rate, state.held, state.paused, state.next_release) == ("seller:p", "2/h", 3, True, None)

    assert rates.resume(queue_redis, "default", "seller:p") == [jobs[0].id, jobs[1].id]
    assert [status(j) for j in jobs] == [JobStatus.QUEUED, JobStatus.QUEUED, JobStatus.RATE_LIMITED]


def test_a_rate_with_a_concurrency_hands_its_released_jobs_to_the_concurrency_limit(queue_redis):
    options = {"limit_key": "seller:c", "limit_rate": "10/s", "limit_concurrency": 1}
    jobs = [queues.enqueue("default", JOB, i, **options) for i in range(3)]
    scoped = limits.scoped("default", "seller:c")
    assert get_queue("default").job_ids == [jobs[0].id]  # released by the rate: 2; by the concurrency: 1
    assert queue_redis.zrange(keys.limit_held_key(scoped), 0, -1) == [jobs[1].id.encode()]
    assert queue_redis.zrange(rates.held_key(scoped), 0, -1) == [jobs[2].id.encode()]
    assert [status(j) for j in jobs] == [JobStatus.QUEUED, JobStatus.RATE_LIMITED, JobStatus.RATE_LIMITED]


def test_a_job_held_by_its_rate_can_be_canceled_and_leaves_its_keys_held_set(queue_redis):
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:x", limit_rate="2/hour") for i in range(3)]
    assert cancel_job(jobs[2].id).outcome == "canceled"
    assert status(jobs[2]) == JobStatus.CANCELED
    assert queue_redis.zcard(rates.held_key(limits.scoped("default", "seller:x"))) == 0


# -- pause of a key without a rate (a concurrency only) ------------------------------------------------------
def finish(job):
    """What rq's worker does when a job succeeds: status finished, then its slot released (rq's promotion)."""
    job = fetch_job(job.id)
    job.set_status(JobStatus.FINISHED)
    get_queue(job.origin).remove(job.id)
    release_slot(job)


def test_a_paused_concurrency_key_keeps_its_held_jobs_held_when_a_slot_frees_and_a_resume_promotes_them(
    queue_redis,
):
    scoped = limits.scoped("default", "cabinet:1")
    jobs = [queues.enqueue("default", JOB, i, limit_key="cabinet:1", limit_concurrency=1) for i in range(3)]
    assert rates.pause(queue_redis, "default", "cabinet:1") == 2
    assert queue_redis.zrange(keys.limit_held_key(scoped), 0, -1) == []  # rq's promotion finds nothing there
    assert queue_redis.zrange(rates.held_key(scoped), 0, -1) == [jobs[1].id.encode(), jobs[2].id.encode()]
    late = queues.enqueue("default", JOB, 3, limit_key="cabinet:1", limit_concurrency=1)  # held by the pause
    other = queues.enqueue("default", JOB, 9, limit_key="cabinet:2", limit_concurrency=1)

    finish(jobs[0])  # its slot frees: rq's worker promotes its key's held jobs, none while paused
    assert get_queue("default").job_ids == [other.id]
    assert [status(j) for j in jobs[1:] + [late]] == [JobStatus.RATE_LIMITED] * 3
    [state] = [s for s in overview(queue_redis) if s.key == "cabinet:1"]
    assert (state.rate, state.concurrency, state.running, state.held, state.paused) == ("", 1, 0, 3, True)
    assert limits.hold_of(fetch_job(late.id)).ahead == 2

    assert rates.resume(queue_redis, "default", "cabinet:1") == [jobs[1].id]
    assert get_queue("default").job_ids == [other.id, jobs[1].id]
    assert queue_redis.zrange(keys.limit_held_key(scoped), 0, -1) == [jobs[2].id.encode(), late.id.encode()]
    assert queue_redis.exists(rates.held_key(scoped), rates.config_key(scoped)) == 0  # the key is rq's alone again
    assert not rates.is_paused(queue_redis, "default", "cabinet:1")
    finish(jobs[1])
    assert get_queue("default").job_ids == [other.id, jobs[2].id]


def test_a_paused_concurrency_key_keeps_its_concurrency_when_rqs_maintenance_drops_its_hash(queue_redis):
    jobs = [queues.enqueue("default", JOB, i, limit_key="cabinet:3", limit_concurrency=2) for i in range(4)]
    rates.pause(queue_redis, "default", "cabinet:3")
    finish(jobs[0])
    finish(jobs[1])
    registry = RateLimitRegistry(limits.scoped("default", "cabinet:3"), connection=queue_redis)
    registry.cleanup()  # rq's maintenance: its sets are empty, so it forgets the key and its concurrency
    assert queue_redis.exists(registry.config_key) == 0
    [state] = overview(queue_redis)
    assert (state.concurrency, state.held, state.paused) == (2, 2, True)
    assert sorted(rates.resume(queue_redis, "default", "cabinet:3")) == sorted([jobs[2].id, jobs[3].id])


def test_a_job_held_by_a_pause_can_be_canceled_and_leaves_the_held_set_it_is_in(queue_redis):
    jobs = [queues.enqueue("default", JOB, i, limit_key="cabinet:4", limit_concurrency=1) for i in range(2)]
    rates.pause(queue_redis, "default", "cabinet:4")
    assert cancel_job(jobs[1].id).outcome == "canceled"
    assert queue_redis.zcard(rates.held_key(limits.scoped("default", "cabinet:4"))) == 0
    assert rates.resume(queue_redis, "default", "cabinet:4") == []


def test_a_job_with_a_rate_and_a_concurrency_held_by_its_rate_leaves_the_rate_held_set_when_canceled(queue_redis):
    options = {"limit_key": "seller:d", "limit_rate": "1/hour", "limit_concurrency": 5}
    jobs = [queues.enqueue("default", JOB, i, **options) for i in range(2)]
    assert status(jobs[1]) == JobStatus.RATE_LIMITED
    assert cancel_job(jobs[1].id).outcome == "canceled"
    assert queue_redis.zcard(rates.held_key(limits.scoped("default", "seller:d"))) == 0


# -- held_by of a job with a rate ---------------------------------------------------------------------------
def test_a_job_held_by_its_rate_alone_says_so_in_its_state_its_rate_and_when_the_next_token_comes():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:h", limit_rate="2/hour") for i in range(4)]
    held_by = queues.job_state(jobs[3].id).held_by
    next_release = held_by.pop("next_release")
    assert held_by == {
        "key": "seller:h",
        "concurrency": None,
        "in_use": None,
        "held": 2,
        "ahead": 1,
        "rate": "2/h",
        "paused": False,
    }
    assert 1790 < next_release <= 1800  # one job every 30 minutes
    released = queues.job_state(jobs[0].id)
    assert (released.state, released.held_by["ahead"], released.held_by["rate"]) == ("queued", None, "2/h")


def test_a_job_of_a_paused_key_says_its_key_is_paused_and_no_next_release(queue_redis):
    rates.pause(queue_redis, "default", "seller:q")
    job = queues.enqueue("default", JOB, 1, limit_key="seller:q", limit_rate="5/s", limit_concurrency=2)
    state = queues.job_state(job.id)
    assert state.state == "held"
    assert {
        k: state.held_by[k] for k in ("concurrency", "in_use", "held", "ahead", "rate", "next_release", "paused")
    } == {
        "concurrency": 2,
        "in_use": 0,
        "held": 1,
        "ahead": 0,
        "rate": "5/s",
        "next_release": None,
        "paused": True,
    }


@pytest.mark.django_db(transaction=True)
def test_the_job_page_of_a_job_held_by_its_rate_shows_its_key_and_rate(operator):
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:pg", limit_rate="2/hour") for i in range(3)]
    html = operator.get(f"/admin/queues/queues/1/{jobs[2].id}/").content.decode()
    assert "Held back by its limit key" in html
    assert '<span class="job-limit-rate">2/h</span>' in html
    assert "job-limit-in-use" not in html  # no concurrency: no slots
    assert "This job waits for a token of its rate" in html
    assert '<span class="job-limit-ahead">0</span>' in html
