"""The panel's periodic jobs page, pause/resume of a schedule, and the missed-run policies, against
a real Redis (the scheduler's own enqueue_jobs, the page through the Django test client)."""

import datetime as dt
import time

import pytest
from django.test import Client
from django.urls import reverse

from queues.catalog.lookup import OptimaJob, get_queue
from queues.keyspace import keys
from queues.models import AuditEntry
from queues.periodic import plan
from queues.periodic.declare import check_schedules, declared_schedules
from queues.periodic.plan import register, scheduled_jobs_key
from queues.periodic.run import PeriodicScheduler, run_schedule
from tests.support.panel import make_staff

UTC = dt.UTC
HOUR = 3600
PAGE = "/admin/queues/periodic/"


def scheduler(connection):
    return PeriodicScheduler(queue_name="lifecycle", connection=connection, interval=5, job_class=OptimaJob)


def score(connection, template_id):
    return connection.zscore(scheduled_jobs_key(), template_id)


def declare(settings, **tick):
    """Declare only the hourly schedule "tick", with ``tick``'s extra keys (e.g. missed=...)."""
    settings.OPTIMA_SCHEDULES = [
        {
            "id": "tick",
            "queue": "lifecycle",
            "func": "tests.jobs.lifecycle.quick",
            "args": [1],
            "interval": HOUR,
            **tick,
        }
    ]


def down_for_three_ticks(connection):
    """The template's score set so that ticks 3h30, 2h30, 1h30 and 30 min ago are all due: the
    scheduler was down across them. -> (now floor, [the four tick unix times])."""
    register(connection)
    first = int(time.time()) - 3 * HOUR - 1800
    connection.zadd(scheduled_jobs_key(), {"schedule-tick": first})
    return [first + k * HOUR for k in range(4)]


def run_ids(connection):
    return sorted(get_queue("lifecycle", connection=connection).job_ids)


# -- missed-run policies ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "missed, runs",
    [
        (None, [0]),  # the default: "once", today's behaviour: one run, for the first missed tick
        ("once", [0]),
        ("skip", []),
        ({"catch_up": 2}, [2, 3]),  # the latest two
        ({"catch_up": 10}, [0, 1, 2, 3]),  # all four, each its own run
    ],
)
def test_a_scheduler_down_across_several_ticks_runs_what_the_missed_policy_says(
    queue_redis, settings, lifecycle_queue, missed, runs
):
    declare(settings, **({} if missed is None else {"missed": missed}))
    ticks = down_for_three_ticks(queue_redis)
    before = time.time()
    scheduler(queue_redis).enqueue_jobs()
    expected = [f"schedule-tick-{ticks[k]}" for k in runs]
    assert run_ids(queue_redis) == sorted(expected)
    last = queue_redis.get(keys.schedule_last_key("tick"))
    assert (last.decode() if last else None) == (expected[-1] if expected else None)
    next_run = score(queue_redis, "schedule-tick")
    if missed in (None, "once"):  # today's: an interval after the poll
        assert before + HOUR <= next_run <= time.time() + HOUR
    else:  # on the cadence: the next tick after now, 30 min from now
        assert next_run == ticks[-1] + HOUR


def test_skip_still_runs_a_tick_that_is_due_but_not_missed(queue_redis, settings, lifecycle_queue):
    declare(settings, missed="skip")
    register(queue_redis)
    tick = int(time.time()) - 3
    queue_redis.zadd(scheduled_jobs_key(), {"schedule-tick": tick})
    scheduler(queue_redis).enqueue_jobs()
    assert run_ids(queue_redis) == [f"schedule-tick-{tick}"]
    assert score(queue_redis, "schedule-tick") == tick + HOUR


def test_cron_catch_up_runs_each_missed_cron_tick_as_its_own_run(queue_redis, settings, lifecycle_queue):
    settings.OPTIMA_SCHEDULES = [
        {
            "id": "hourly",
            "queue": "lifecycle",
            "func": "tests.jobs.lifecycle.quick",
            "cron": "0 * * * *",
            "missed": {"catch_up": 3},
        }
    ]
    register(queue_redis)
    now = dt.datetime.now(UTC)
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    first = this_hour - dt.timedelta(hours=5)
    queue_redis.zadd(scheduled_jobs_key(), {"schedule-hourly": first.timestamp()})
    scheduler(queue_redis).enqueue_jobs()
    expected = [f"schedule-hourly-{int((this_hour - dt.timedelta(hours=h)).timestamp())}" for h in (2, 1, 0)]
    assert run_ids(queue_redis) == sorted(expected)
    assert score(queue_redis, "schedule-hourly") == (this_hour + dt.timedelta(hours=1)).timestamp()


def test_a_paused_schedules_due_tick_moves_to_the_next_tick_without_a_run(queue_redis, settings, lifecycle_queue):
    declare(settings)
    ticks = down_for_three_ticks(queue_redis)
    plan.set_paused("tick", True, queue_redis)
    scheduler(queue_redis).enqueue_jobs()
    assert run_ids(queue_redis) == []
    assert score(queue_redis, "schedule-tick") == ticks[-1] + HOUR
    assert queue_redis.get(keys.schedule_last_key("tick")) is None
    plan.set_paused("tick", False, queue_redis)
    queue_redis.zadd(scheduled_jobs_key(), {"schedule-tick": ticks[-1]})
    scheduler(queue_redis).enqueue_jobs()
    assert run_ids(queue_redis) == [f"schedule-tick-{ticks[-1]}"]


def test_pausing_an_undeclared_schedule_names_the_declared_ones(queue_redis, settings, lifecycle_queue):
    declare(settings)
    with pytest.raises(KeyError, match="No periodic schedule 'nope'; declared: tick"):
        plan.set_paused("nope", True, queue_redis)
    assert queue_redis.exists(keys.schedules_paused_key()) == 0


def test_a_bad_missed_policy_is_reported_by_the_system_check(settings, lifecycle_queue):
    for bad in ("always", {"catch_up": 0}, {"catch_up": True}, {"catch_up": 2, "x": 1}, ["skip"]):
        declare(settings, missed=bad)
        errors = check_schedules()
        assert [e.id for e in errors] == ["queues.E037"], bad
        assert errors[0].msg == (
            f"OPTIMA_SCHEDULES['tick']['missed'] must be 'once', 'skip' or {{'catch_up': N}} "
            f"with N a whole number from 1 to 1000, got {bad!r}."
        )
    for good in ("once", "skip", {"catch_up": 1}, {"catch_up": 1000}):
        declare(settings, missed=good)
        assert check_schedules() == []
    declare(settings, misssed="skip")
    assert [(e.id, e.hint.startswith("Did you mean 'missed'?")) for e in check_schedules()] == [("queues.E031", True)]


# -- the page ---------------------------------------------------------------------------------


@pytest.fixture
def acting(django_user_model, prod):
    client = Client()
    client.force_login(make_staff(django_user_model, "acting", "queues.act_on_queue_panel"))
    return client


@pytest.fixture
def viewer(django_user_model, prod):
    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    return client


def row_of(html, schedule_id):
    start = html.index(f'data-schedule="{schedule_id}"')
    return html[start : html.index("</tr>", start)]


@pytest.mark.django_db
def test_the_page_lists_every_schedule_with_its_last_and_next_run(
    acting, queue_redis, lifecycle_schedules, django_capture_on_commit_callbacks
):
    register(queue_redis)
    when = dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    schedule = next(s for s in declared_schedules() if s.id == "tick")
    with django_capture_on_commit_callbacks(execute=True):  # the enqueue waits for the commit
        run = run_schedule(schedule, when)
    run.set_status("finished")
    queue_redis.hset(
        run.key, mapping={"started_at": "2026-01-01T10:00:01.000000Z", "ended_at": "2026-01-01T10:00:03.500000Z"}
    )
    nightly_next = dt.datetime.fromtimestamp(score(queue_redis, "schedule-nightly"), UTC)

    html = acting.get(PAGE).content.decode()
    tick, nightly = row_of(html, "tick"), row_of(html, "nightly")
    assert "every 3600 s" in tick and "tests.jobs.lifecycle.quick" in tick and ">lifecycle<" in tick
    assert '<span class="schedule-last-status">finished</span>' in tick
    assert '<span class="schedule-last-started">2026-01-01 10:00:01</span>' in tick
    assert '<span class="schedule-last-duration">2.5</span>' in tick
    assert "cron 0 3 * * * (UTC)" in nightly
    last_cell = nightly.split('<td class="schedule-last">')[1].split("</td>")[0]
    assert last_cell.split('<div class="schedule-runs">')[0].strip() == "never"
    assert last_cell.split('<div class="schedule-runs">')[1].strip() == "no finished run kept</div>"
    assert f"{nightly_next:%Y-%m-%d %H:%M:%S}" in nightly
    assert "Pause nightly" in nightly and "schedule-state-active" in nightly
    home = acting.get("/admin/queues/").content.decode()
    assert f'href="{reverse("django_rq:queues_periodic")}"' in home


@pytest.mark.django_db
def test_the_last_run_link_goes_to_the_jobs_panel_page(
    acting, queue_redis, lifecycle_schedules, django_capture_on_commit_callbacks
):
    from django_rq.settings import get_queues_map

    register(queue_redis)
    schedule = next(s for s in declared_schedules() if s.id == "tick")
    with django_capture_on_commit_callbacks(execute=True):
        run = run_schedule(schedule, dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    url = reverse("django_rq:job_detail", args=[get_queues_map()["lifecycle"], run.id])
    assert f'href="{url}"' in row_of(acting.get(PAGE).content.decode(), "tick")
    assert acting.get(url).status_code == 200


@pytest.mark.django_db
def test_a_last_run_gone_from_redis_is_shown_as_gone(acting, queue_redis, lifecycle_schedules):
    register(queue_redis)
    queue_redis.set(keys.schedule_last_key("tick"), "schedule-tick-1")
    assert "gone (expired or deleted)" in row_of(acting.get(PAGE).content.decode(), "tick")


@pytest.mark.django_db
def test_pause_and_resume_from_the_page_are_audited_and_the_page_shows_the_state(
    acting, queue_redis, lifecycle_schedules
):
    register(queue_redis)
    response = acting.post(PAGE, {"schedule": "nightly", "action": "pause"})
    assert (response.status_code, response["Location"]) == (302, PAGE)
    assert plan.paused_ids(queue_redis) == {"nightly"}
    row = row_of(acting.get(PAGE).content.decode(), "nightly")
    assert "schedule-state-paused" in row and "Resume nightly" in row
    acting.post(PAGE, {"schedule": "nightly", "action": "resume"})
    assert plan.paused_ids(queue_redis) == set()
    entries = list(AuditEntry.objects.order_by("pk").values_list("identity", "action", "queue", "outcome"))
    assert entries == [
        ("acting", "pause-schedule", "lifecycle", "ok"),
        ("acting", "resume-schedule", "lifecycle", "ok"),
    ]


@pytest.mark.django_db
def test_pausing_an_unknown_schedule_is_refused_and_audited_as_an_error(acting, queue_redis, lifecycle_schedules):
    response = acting.post(PAGE, {"schedule": "nope", "action": "pause"}, follow=True)
    assert "No periodic schedule &#x27;nope&#x27;; declared: nightly, tick." in response.content.decode()
    assert queue_redis.exists(keys.schedules_paused_key()) == 0
    assert list(AuditEntry.objects.values_list("action", "outcome")) == [("pause-schedule", "error")]


@pytest.mark.django_db
def test_a_view_only_user_sees_the_page_without_buttons_and_cannot_pause(viewer, queue_redis, lifecycle_schedules):
    register(queue_redis)
    page = viewer.get(PAGE)
    assert page.status_code == 200 and 'data-schedule="tick"' in page.content.decode()
    assert "Pause tick" not in page.content.decode()
    assert viewer.post(PAGE, {"schedule": "tick", "action": "pause"}).status_code == 403
    assert queue_redis.exists(keys.schedules_paused_key()) == 0
    assert AuditEntry.objects.count() == 0


@pytest.mark.django_db
def test_pause_needs_the_csrf_token(django_user_model, prod, queue_redis, lifecycle_schedules):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_staff(django_user_model, "acting", "queues.act_on_queue_panel"))
    assert client.post(PAGE, {"schedule": "tick", "action": "pause"}).status_code == 403
    assert queue_redis.exists(keys.schedules_paused_key()) == 0


@pytest.mark.django_db
def test_the_page_shows_each_next_run_in_the_schedules_zone_and_in_utc(acting, queue_redis, settings, lifecycle_queue):
    declare(settings)
    settings.OPTIMA_SCHEDULES += [
        {
            "id": "moscow",
            "queue": "lifecycle",
            "func": "tests.jobs.lifecycle.quick",
            "cron": "0 3 * * *",
            "tz": "Europe/Moscow",
        }
    ]
    register(queue_redis, now=dt.datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    html = acting.get(PAGE).content.decode()
    moscow, tick = row_of(html, "moscow"), row_of(html, "tick")
    assert "cron 0 3 * * * (Europe/Moscow)" in moscow
    assert '<span class="schedule-next-local-time">2026-01-02 03:00:00</span>' in moscow
    assert '<span class="schedule-tz">Europe/Moscow</span>' in moscow
    assert '<span class="schedule-next" data-timestamp="1767312000">2026-01-02 00:00:00</span> UTC' in moscow
    # a schedule in UTC (the default zone) shows its next run once, not twice
    assert "schedule-next-local" not in tick and tick.count("</span> UTC") == 1
