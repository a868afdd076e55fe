"""Retries and backoff: the pure policy, then the schedule real workers write into Redis."""

import datetime as dt

import pytest
from rq.timeouts import JobTimeoutException

import queues
from queues.exceptions import PermanentError, RetryAfter
from queues.failures.retry import RetryPolicy, backoff_delay, decide, resolve_policy
from tests.jobs.lifecycle import BadInput
from tests.support import wait_for
from tests.support.lifecycle import (
    WORKER_ENV,
    fetch,
    release_now,
    scheduled_score,
    wait_dead,
    wait_row,
    wait_scheduled_for_attempt,
)

# --- the policy (pure) ---------------------------------------------------------------------------


def test_default_policy_waits_1_2_4_8_seconds_before_the_four_retries():
    policy = resolve_policy({}, {}, {})
    assert policy.attempts == 5
    assert [backoff_delay(attempt, policy) for attempt in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]


def test_backoff_max_caps_the_exponential_delay():
    policy = RetryPolicy(backoff=1, backoff_max=3)
    assert [backoff_delay(attempt, policy) for attempt in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 3.0]


def test_jitter_adds_at_most_its_fraction_of_the_delay():
    policy = RetryPolicy(backoff=2, jitter=0.5)
    assert backoff_delay(2, policy, rand=lambda: 0.0) == 4.0
    assert backoff_delay(2, policy, rand=lambda: 0.5) == 5.0
    assert backoff_delay(2, policy, rand=lambda: 0.999) == pytest.approx(5.998)


def test_precedence_is_enqueue_then_queue_then_global():
    global_opts = {"attempts": 5, "backoff": 1.0, "backoff_max": None, "jitter": 0.0, "timeout": 180}
    queue_opts = {"attempts": 3, "backoff": 2.0}
    assert resolve_policy({}, queue_opts, global_opts) == RetryPolicy(attempts=3, backoff=2.0)
    assert resolve_policy({"attempts": 1}, queue_opts, global_opts).attempts == 1
    assert resolve_policy({"attempts": None}, queue_opts, global_opts).attempts == 3
    assert resolve_policy({}, {}, global_opts).attempts == 5


def test_a_policy_of_one_attempt_dead_letters_the_first_failure():
    assert decide(1, RetryPolicy(attempts=1), RuntimeError("x")).retry is False
    assert decide(1, RetryPolicy(attempts=1), RuntimeError("x")).reason == "exhausted"


def test_permanent_and_non_retryable_errors_are_dead_with_attempts_left():
    policy = RetryPolicy(attempts=5, non_retryable=("tests.jobs.lifecycle.BadInput",))
    assert decide(1, policy, PermanentError("4xx")).reason == "permanent"
    assert decide(1, policy, BadInput("nope")).reason == "permanent"
    assert decide(1, policy, ValueError("transient")).retry is True


def test_timeout_is_retried_unless_it_was_the_last_attempt():
    policy = RetryPolicy(attempts=2)
    assert decide(1, policy, JobTimeoutException("slow")).retry is True
    assert decide(2, policy, JobTimeoutException("slow")).reason == "timeout"


def test_retry_after_replaces_the_backoff_and_uses_up_an_attempt():
    policy = RetryPolicy(attempts=3)
    first = decide(1, policy, RetryAfter(30))
    assert (first.retry, first.delay) == (True, 30.0)
    assert decide(3, policy, RetryAfter(30)).reason == "exhausted"


def test_a_failure_without_an_exception_object_is_retried_by_the_policy():
    # e.g. a work horse killed by the OOM killer: RQ hands over only a message
    assert decide(1, RetryPolicy(), None).delay == 1.0


# --- the schedule written by real workers ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_default_policy_schedules_each_retry_1_2_4_8_seconds_after_the_failure(start_worker, queue_redis):
    """The ScheduledJobRegistry score of each retry minus the failure time RQ recorded (``ended_at``)."""
    job = queues.enqueue("default", "tests.jobs.lifecycle.fail", "always")
    start_worker("default", "--without-scheduler")
    observed = []
    for next_attempt in (2, 3, 4, 5):
        waiting = wait_scheduled_for_attempt(queue_redis, "default", job.id, next_attempt)
        score = scheduled_score(queue_redis, "default", job.id)
        observed.append(round(score - waiting.ended_at.timestamp(), 3))
        release_now(queue_redis, "default", job.id)
    dead = wait_dead(queue_redis, "default", job.id)
    assert observed == [1.0, 2.0, 4.0, 8.0]
    assert dead.meta["attempt"] == 5
    assert dead.meta["dead"] == "exhausted"
    row = wait_row(job.id)
    assert (row.attempts_made, row.attempts_allowed, row.reason) == (5, 5, "exhausted")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_retry_waits_for_a_scheduler_and_runs_once_one_starts(start_worker, queue_redis, tmp_path):
    runs = tmp_path / "runs"
    job = queues.enqueue("default", "tests.jobs.lifecycle.count_runs", str(runs), fail_times=1)
    first = start_worker("default", "--without-scheduler")
    wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    due = scheduled_score(queue_redis, "default", job.id)
    wait_for(lambda: dt.datetime.now(dt.UTC).timestamp() > due + 2, timeout=30, message="the retry due")
    assert scheduled_score(queue_redis, "default", job.id) == due  # still waiting, not lost
    assert fetch(job.id, queue_redis).get_status() == "scheduled"
    first.stop()
    start_worker("default")  # with RQ's scheduler
    wait_for(lambda: fetch(job.id, queue_redis).get_status() == "finished", timeout=60, message="the retry to run")
    assert len(runs.read_text().splitlines()) == 2
    assert fetch(job.id, queue_redis).meta["attempt"] == 2


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_retry_after_schedules_the_next_attempt_after_its_delay_and_counts_as_an_attempt(start_worker, queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.rate_limited", 30, attempts=2)
    start_worker("default", "--without-scheduler")
    waiting = wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    assert round(scheduled_score(queue_redis, "default", job.id) - waiting.ended_at.timestamp(), 3) == 30.0
    release_now(queue_redis, "default", job.id)
    dead = wait_dead(queue_redis, "default", job.id)
    assert dead.meta["dead"] == "exhausted"
    row = wait_row(job.id)
    assert (row.exc_type, row.attempts_made, row.reason) == ("queues.exceptions.RetryAfter", 2, "exhausted")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_per_queue_attempts_and_backoff_apply_and_attempts_1_per_enqueue_disables_retries(
    start_worker, queue_redis, lifecycle_queue
):
    retried = queues.enqueue("lifecycle", "tests.jobs.lifecycle.fail")
    once = queues.enqueue("lifecycle", "tests.jobs.lifecycle.fail", attempts=1)
    start_worker("lifecycle", "--without-scheduler", env=WORKER_ENV)
    waiting = wait_scheduled_for_attempt(queue_redis, "lifecycle", retried.id, 2)
    assert waiting.meta["attempts_allowed"] == 3  # the queue's, not the global 5
    dead = wait_dead(queue_redis, "lifecycle", once.id)
    assert (dead.meta["attempt"], dead.meta["attempts_allowed"], dead.meta["dead"]) == (1, 1, "exhausted")
    assert scheduled_score(queue_redis, "lifecycle", once.id) is None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_worker_sends_the_lifecycle_signals(start_worker, queue_redis, tmp_path, lifecycle_queue):
    import json

    events_file = tmp_path / "events.jsonl"
    flaky = queues.enqueue("lifecycle", "tests.jobs.lifecycle.count_runs", str(tmp_path / "runs"), fail_times=1)
    doomed = queues.enqueue("lifecycle", "tests.jobs.lifecycle.fail", attempts=1)
    start_worker("lifecycle", env=dict(WORKER_ENV, OPTIMA_TEST_EVENTS_FILE=str(events_file)))
    wait_dead(queue_redis, "lifecycle", doomed.id)
    wait_for(lambda: fetch(flaky.id, queue_redis).get_status() == "finished", timeout=60, message="the retry")
    wait_for(lambda: events_file.read_text().count("job_succeeded"), timeout=30, message="job_succeeded")
    lines = [json.loads(line) for line in events_file.read_text().splitlines()]

    def of(job):
        return [
            {k: v for k, v in line.items() if k not in ("pid", "duration", "job")}
            for line in lines
            if line["job"] == job.id
        ]

    assert of(flaky) == [
        {"signal": "job_started", "queue": "lifecycle"},
        {"signal": "job_failed", "queue": "lifecycle", "exc_info": "RuntimeError", "will_retry": True},
        {"signal": "job_retry_scheduled", "queue": "lifecycle", "delay": 1.0, "attempt": 2},
        {"signal": "job_started", "queue": "lifecycle"},
        {"signal": "job_succeeded", "queue": "lifecycle"},
    ]
    assert of(doomed) == [
        {"signal": "job_started", "queue": "lifecycle"},
        {"signal": "job_failed", "queue": "lifecycle", "exc_info": "RuntimeError", "will_retry": False},
        {"signal": "job_dead", "queue": "lifecycle", "reason": "exhausted"},
    ]
    assert all(line["duration"] >= 0 for line in lines if "duration" in line)
