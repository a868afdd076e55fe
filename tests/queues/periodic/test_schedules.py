"""Periodic jobs: idempotent registration with rq-scheduler, UTC cron, fresh runs with the queue's policy."""

import datetime as dt

import pytest

from queues.catalog.lookup import OptimaJob, get_queue
from queues.conf import prefix
from queues.periodic.declare import Schedule, check_schedules, declared_schedules
from queues.periodic.plan import register, scheduled_jobs_key
from queues.periodic.run import PeriodicScheduler, run_schedule
from tests.support import wait_for
from tests.support.lifecycle import WORKER_ENV, fetch, wait_scheduled_for_attempt

UTC = dt.UTC


def templates(connection):
    """{template id: score} of our periodic jobs in rq-scheduler's sorted set."""
    return {
        k.decode(): v
        for k, v in connection.zrange(scheduled_jobs_key(), 0, -1, withscores=True)
        if k.decode().startswith("schedule-")
    }


def test_registering_twice_or_restarting_keeps_one_entry_per_schedule_and_its_next_run(
    queue_redis, lifecycle_schedules
):
    first = register(queue_redis, now=dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    before = templates(queue_redis)
    second = register(queue_redis, now=dt.datetime(2026, 1, 1, 10, 30, tzinfo=UTC))
    assert sorted(first.added) == ["nightly", "tick"]
    assert (second.added, second.updated, sorted(second.kept)) == ([], [], ["nightly", "tick"])
    assert templates(queue_redis) == before
    assert before == {
        "schedule-nightly": dt.datetime(2026, 1, 2, 3, 0, tzinfo=UTC).timestamp(),
        "schedule-tick": dt.datetime(2026, 1, 1, 11, 0, tzinfo=UTC).timestamp(),
    }
    assert scheduled_jobs_key() == f"{prefix()}:scheduler:scheduled_jobs"


@pytest.mark.django_db  # register reads the admin's stored schedules; unreadable, it removes nothing
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_schedule_removed_from_settings_disappears_and_a_changed_one_is_rescheduled(
    queue_redis, settings, lifecycle_schedules
):
    register(queue_redis, now=dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    settings.OPTIMA_SCHEDULES = [dict(lifecycle_schedules[0], interval=60)]
    summary = register(queue_redis, now=dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    assert (summary.updated, summary.removed) == (["tick"], ["nightly"])
    assert templates(queue_redis) == {"schedule-tick": dt.datetime(2026, 1, 1, 10, 1, tzinfo=UTC).timestamp()}
    assert not queue_redis.exists(OptimaJob.key_for("schedule-nightly"))


def test_cron_is_evaluated_in_utc_whatever_the_servers_time_zone(settings):
    settings.TIME_ZONE = "Asia/Vladivostok"  # Django sets the process's TZ from it
    nightly = Schedule(id="n", queue="default", func="tests.jobs.lifecycle.quick", cron="0 3 * * *")
    assert nightly.next_run(dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC)) == dt.datetime(2026, 1, 2, 3, 0, tzinfo=UTC)
    assert nightly.next_run(dt.datetime(2026, 1, 1, 2, 0, tzinfo=UTC)) == dt.datetime(2026, 1, 1, 3, 0, tzinfo=UTC)


def test_a_due_schedule_runs_as_a_fresh_job_with_the_queues_retry_policy_and_result_ttl(
    queue_redis, lifecycle_schedules
):
    register(queue_redis)
    schedule = next(s for s in declared_schedules() if s.template_id == "schedule-tick")
    when = dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    run = run_schedule(schedule, when)
    again = run_schedule(schedule, when)  # a second scheduler on the same tick
    assert again is None
    assert get_queue("lifecycle").job_ids == [run.id]
    run = fetch(run.id, queue_redis)
    assert run.id == f"schedule-tick-{int(when.timestamp())}"
    assert (run.func_name, run.args) == ("tests.jobs.lifecycle.quick", [1])
    assert (run.meta["attempts_allowed"], run.meta["attempt"], run.meta["schedule"]) == (3, 1, "tick")
    assert run.result_ttl == 86400


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_rqscheduler_registers_on_start_and_overlapping_runs_do_not_share_state(
    start_worker, queue_redis, lifecycle_schedules
):
    """Two ticks of a failing schedule: the first run's retry does not touch the second run."""
    started = start_worker("--burst", command="rqscheduler", env=WORKER_ENV)
    assert started.wait(60) == 0, started.output()
    assert sorted(templates(queue_redis)) == ["schedule-nightly", "schedule-tick"]

    scheduler = PeriodicScheduler(queue_name="lifecycle", connection=queue_redis, interval=5, job_class=OptimaJob)
    worker = start_worker("lifecycle", "--without-scheduler", env=WORKER_ENV)
    queue_redis.zadd(scheduled_jobs_key(), {"schedule-nightly": 1_700_000_000})
    scheduler.enqueue_jobs()
    first_id = "schedule-nightly-1700000000"
    wait_scheduled_for_attempt(queue_redis, "lifecycle", first_id, 2)
    next_tick = templates(queue_redis)["schedule-nightly"]
    assert dt.datetime.fromtimestamp(next_tick, UTC).time() == dt.time(3, 0)

    queue_redis.zadd(scheduled_jobs_key(), {"schedule-nightly": 1_700_000_060})
    scheduler.enqueue_jobs()
    second_id = "schedule-nightly-1700000060"
    wait_for(
        lambda: fetch(second_id, queue_redis).get_status() == "scheduled",
        timeout=60,
        message="the second run to fail once",
    )
    first, second = fetch(first_id, queue_redis), fetch(second_id, queue_redis)
    assert (first.meta["attempt"], second.meta["attempt"]) == (2, 2)
    assert first.id != second.id and first.meta["first_failed_at"] != second.meta["first_failed_at"]
    assert OptimaJob.fetch("schedule-nightly", connection=queue_redis).get_status() == "scheduled"
    worker.stop()


def test_bad_schedule_declarations_are_reported_by_system_checks(settings):
    settings.OPTIMA_SCHEDULES = [
        {"queue": "default", "func": "tests.jobs.lifecycle.quick", "interval": 60},
        {"id": "a", "queue": "nope", "func": "tests.jobs.lifecycle.quick", "interval": 60},
        {"id": "b", "queue": "default", "func": "tests.jobs.lifecycle.missing", "interval": 60},
        {"id": "c", "queue": "default", "func": "tests.jobs.lifecycle.quick", "cron": "every day"},
        {"id": "d", "queue": "default", "func": "tests.jobs.lifecycle.quick", "cron": "* * * * *", "interval": 5},
        {"id": "e", "queue": "default", "func": "tests.jobs.lifecycle.quick", "interval": 60, "cronn": "x"},
    ]
    ids = [error.id for error in check_schedules()]
    assert ids == ["queues.E032", "queues.E033", "queues.E034", "queues.E035", "queues.E035", "queues.E031"]
    settings.OPTIMA_SCHEDULES = [
        {"id": "ok", "queue": "default", "func": "tests.jobs.lifecycle.quick", "cron": "*/5 * * * *", "attempts": 2}
    ]
    assert check_schedules() == []


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_two_rqschedulers_running_at_once_register_each_schedule_once_and_enqueue_a_tick_once(
    start_worker, queue_redis, lifecycle_schedules
):
    import signal

    procs = [start_worker("--interval", "1", command="rqscheduler", env=WORKER_ENV) for _ in range(2)]
    for proc in procs:
        wait_for(lambda p=proc: "Periodic jobs:" in p.output(), timeout=60, message="registration")
    assert sorted(templates(queue_redis)) == ["schedule-nightly", "schedule-tick"]
    queue_redis.zadd(scheduled_jobs_key(), {"schedule-tick": 1_700_000_000})
    wait_for(lambda: templates(queue_redis)["schedule-tick"] > 1_700_000_000, timeout=60, message="the tick")
    assert get_queue("lifecycle").job_ids == ["schedule-tick-1700000000"]
    assert sorted(templates(queue_redis)) == ["schedule-nightly", "schedule-tick"]
    for proc in procs:
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.output()
