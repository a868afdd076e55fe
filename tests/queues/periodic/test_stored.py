"""Schedules stored in the database and edited in the admin: validated as declarations are (the form's
errors on their fields), over a declared schedule (the database wins, the page says so), audited, paused by
``enabled``, picked up by a running ``rqscheduler``; and each schedule's last runs with their outcome."""

import datetime as dt
import json

import pytest
from django.test import Client

from queues.catalog.lookup import OptimaJob
from queues.keyspace import keys
from queues.models import AuditEntry, StoredSchedule
from queues.periodic import history, stored
from queues.periodic.declare import declared_schedules
from queues.periodic.plan import register, scheduled_jobs_key
from queues.periodic.run import PeriodicScheduler, run_schedule
from tests.support import wait_for
from tests.support.lifecycle import WORKER_ENV
from tests.support.panel import make_staff
from tests.support.worker import run_burst

UTC = dt.UTC
ADD = "/admin/queues/storedschedule/add/"
PAGE = "/admin/queues/periodic/"


@pytest.fixture
def editor(django_user_model, prod):
    """Staff who may edit stored schedules and see the panel."""
    client = Client()
    perms = [f"queues.{verb}_storedschedule" for verb in ("add", "change", "delete", "view")]
    client.force_login(make_staff(django_user_model, "editor", *perms, "queues.view_queue_panel"))
    return client


def form(**fields):
    """The admin form's POST data: every field, blank unless given."""
    data = {
        "schedule_id": "",
        "enabled": "on",
        "queue": "",
        "func": "",
        "args": "[]",
        "kwargs": "{}",
        "cron": "",
        "interval": "",
        "tz": "",
        "missed": "",
        "catch_up": "",
        "attempts": "",
        "timeout": "",
    }
    data.update(fields)
    if data.get("enabled") is False:
        del data["enabled"]
    return data


def score(connection, schedule_id):
    return connection.zscore(scheduled_jobs_key(), f"schedule-{schedule_id}")


@pytest.mark.django_db
def test_the_admin_form_refuses_what_a_declaration_refuses_and_names_the_field(editor, lifecycle_schedules):
    answer = editor.post(
        ADD,
        form(schedule_id="Bad Id", queue="nope", func="tests.jobs.lifecycle.missing", cron="0 3 * * *", tz="Mars/Base"),
    )
    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert sorted(errors) == ["func", "queue", "schedule_id", "tz"]
    assert errors["tz"] == [
        "stored schedule 'Bad Id'['tz'] is 'Mars/Base', which is not a known IANA time zone. Give an IANA time "
        "zone name, e.g. 'Europe/Moscow' or 'America/New_York' (or leave 'tz' out for UTC); where the system has "
        "no zone database, install the tzdata package."
    ]
    assert errors["queue"][0].startswith("stored schedule 'Bad Id'['queue'] is 'nope', which is not a declared queue.")
    answer = editor.post(ADD, form(schedule_id="new", queue="lifecycle", func="tests.jobs.lifecycle.quick"))
    assert list(answer.context["adminform"].form.errors) == ["cron"]  # neither cron nor interval
    assert StoredSchedule.objects.count() == 0
    assert AuditEntry.objects.count() == 0


@pytest.mark.django_db
def test_an_admin_row_overrides_a_declared_schedule_is_audited_pauses_it_and_its_delete_restores_it(
    editor, queue_redis, lifecycle_schedules
):
    now = dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    register(queue_redis, now=now)
    assert score(queue_redis, "nightly") == dt.datetime(2026, 1, 2, 3, 0, tzinfo=UTC).timestamp()

    answer = editor.post(ADD, form(schedule_id="nightly", cron="0 4 * * *", tz="Europe/Moscow"))
    assert answer.status_code == 302, answer.context["adminform"].form.errors
    row = StoredSchedule.objects.get()
    nightly = next(s for s in stored.schedules_in_force() if s.id == "nightly")
    assert (nightly.cron, nightly.tz, nightly.func, nightly.args, nightly.stored) == (
        "0 4 * * *",
        "Europe/Moscow",
        "tests.jobs.lifecycle.fail",  # blank fields keep the declared values
        ("nightly",),
        True,
    )
    assert register(queue_redis, now=now).updated == ["nightly"]
    assert score(queue_redis, "nightly") == dt.datetime(2026, 1, 2, 1, 0, tzinfo=UTC).timestamp()  # 04:00 Moscow
    page = editor.get(PAGE).content.decode()
    nightly_row = page[page.index('data-schedule="nightly"') :].split("</tr>")[0]
    assert '<span class="schedule-edited">edited in the admin</span>' in nightly_row
    assert "cron 0 4 * * * (Europe/Moscow)" in nightly_row

    change = f"/admin/queues/storedschedule/{row.pk}/change/"
    answer = editor.post(change, form(schedule_id="nightly", cron="0 4 * * *", tz="Europe/Moscow", enabled=False))
    assert answer.status_code == 302
    queue_redis.zadd(scheduled_jobs_key(), {"schedule-nightly": 1_700_000_000})
    PeriodicScheduler(queue_name="lifecycle", connection=queue_redis, interval=5, job_class=OptimaJob).enqueue_jobs()
    assert not queue_redis.exists(OptimaJob.key_for("schedule-nightly-1700000000"))  # disabled: no run
    assert score(queue_redis, "nightly") > 1_700_000_000  # its tick moved on
    assert "paused (disabled in the admin)" in editor.get(PAGE).content.decode()

    answer = editor.post(f"/admin/queues/storedschedule/{row.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302
    assert register(queue_redis, now=now).updated == ["nightly"]
    assert score(queue_redis, "nightly") == dt.datetime(2026, 1, 2, 3, 0, tzinfo=UTC).timestamp()
    assert list(AuditEntry.objects.order_by("pk").values_list("identity", "action")) == [
        ("editor", "add-schedule"),
        ("editor", "change-schedule"),
        ("editor", "delete-schedule"),
    ]
    details = list(AuditEntry.objects.order_by("pk").values_list("detail", flat=True))
    assert details[0] == "stored schedule nightly (over the declared one): cron '0 4 * * *' in Europe/Moscow, enabled"
    assert details[1].endswith("paused (disabled) (changed: enabled)")


@pytest.mark.django_db
def test_a_stored_row_that_became_invalid_is_left_out_and_its_declared_schedule_runs(
    queue_redis, lifecycle_schedules, caplog
):
    StoredSchedule.objects.create(prefix=_prefix(), schedule_id="tick", queue="gone", interval=60)
    tick = next(s for s in stored.schedules_in_force() if s.id == "tick")
    assert (tick.queue, tick.interval, tick.stored) == ("lifecycle", 3600, False)
    assert "Stored schedule 'tick' left out" in caplog.text


def _prefix():
    from queues import conf

    return conf.prefix()


@pytest.mark.django_db(transaction=True)  # the in-process worker closes the database connection
def test_each_schedules_last_50_runs_are_kept_with_their_outcome_and_shown(
    editor, queue_redis, settings, lifecycle_schedules, django_capture_on_commit_callbacks
):
    doomed = {"id": "doomed", "queue": "lifecycle", "func": "tests.jobs.lifecycle.fail_permanently", "interval": 60}
    settings.OPTIMA_SCHEDULES = [*lifecycle_schedules, doomed]
    tick = next(s for s in declared_schedules() if s.id == "tick")
    with django_capture_on_commit_callbacks(execute=True):
        run = run_schedule(tick, dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
        other = run_schedule(tick, dt.datetime(2026, 1, 1, 11, 0, tzinfo=UTC))
        dead = run_schedule(declared_schedules()[0], dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    run_burst(queue_redis, "lifecycle")  # a real worker: its success and dead-letter hooks write the history
    runs = history.runs(queue_redis, "tick")
    assert [(r["id"], r["outcome"], r["tick"]) for r in runs] == [
        (other.id, "succeeded", "2026-01-01T11:00:00+00:00"),
        (run.id, "succeeded", "2026-01-01T10:00:00+00:00"),
    ]
    assert [(r["id"], r["outcome"]) for r in history.runs(queue_redis, "doomed")] == [(dead.id, "dead (permanent)")]
    assert history.runs(queue_redis, "nightly") == []
    for i in range(60):
        queue_redis.lpush(keys.schedule_runs_key("tick"), json.dumps({"id": f"old-{i}", "outcome": "succeeded"}))
    queue_redis.lpush(keys.schedule_runs_key("tick"), "not json")
    with django_capture_on_commit_callbacks(execute=True):
        last = run_schedule(tick, dt.datetime(2026, 1, 1, 12, 0, tzinfo=UTC))
    run_burst(queue_redis, "lifecycle")
    assert queue_redis.llen(keys.schedule_runs_key("tick")) == history.KEPT
    assert history.runs(queue_redis, "tick")[0]["id"] == last.id
    page = editor.get(PAGE).content.decode()
    tick_row = page[page.index('data-schedule="tick"') :].split("</tr>")[0]
    assert "<summary>49 finished</summary>" in tick_row  # 50 kept, the one that is not JSON left out
    assert f'<code>{last.id}</code> <span class="schedule-run-outcome">succeeded</span>' in tick_row


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_schedule_edited_in_the_admin_is_picked_up_by_a_running_rqscheduler(
    start_worker, editor, queue_redis, lifecycle_schedules
):
    scheduler = start_worker("--interval", "1", command="rqscheduler", env=WORKER_ENV)
    wait_for(lambda: score(queue_redis, "nightly") is not None, timeout=60, message="registration")
    declared_next = score(queue_redis, "nightly")

    assert editor.post(ADD, form(schedule_id="nightly", cron="15 4 * * *", tz="Asia/Tokyo")).status_code == 302
    added = form(schedule_id="added", queue="lifecycle", func="tests.jobs.lifecycle.quick", args="[7]")
    assert editor.post(ADD, dict(added, interval="86400")).status_code == 302
    wait_for(lambda: score(queue_redis, "added") is not None, timeout=30, message="the added schedule registered")
    wait_for(lambda: score(queue_redis, "nightly") != declared_next, timeout=30, message="nightly rescheduled")
    moved = dt.datetime.fromtimestamp(score(queue_redis, "nightly"), UTC)
    assert (moved.hour, moved.minute) == (19, 15)  # 04:15 in Tokyo (UTC+9)

    queue_redis.zadd(scheduled_jobs_key(), {"schedule-added": 1_700_000_000})  # due: the scheduler runs it
    run_id = "schedule-added-1700000000"
    wait_for(lambda: queue_redis.exists(OptimaJob.key_for(run_id)), timeout=30, message="the stored schedule's run")
    assert OptimaJob.fetch(run_id, connection=queue_redis).args == [7]

    StoredSchedule.objects.filter(schedule_id="added").delete()
    wait_for(lambda: score(queue_redis, "added") is None, timeout=30, message="the deleted schedule removed")
    assert "Stored schedules changed in the admin" in scheduler.output()
    scheduler.stop()


def test_when_the_stored_schedules_cannot_be_read_register_removes_no_template(
    queue_redis, settings, lifecycle_schedules
):
    """No database here (the test has no access): the admin's rows are unknown, so a template that is not
    declared may be one of theirs and stays; what is declared is registered as usual."""
    register(queue_redis)
    settings.OPTIMA_SCHEDULES = [lifecycle_schedules[0]]
    summary = register(queue_redis)
    assert (summary.kept, summary.removed) == (["tick"], [])
    assert score(queue_redis, "nightly") is not None
