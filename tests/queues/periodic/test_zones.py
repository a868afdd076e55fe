"""Cron schedules in a time zone: wall-clock ticks, once across daylight-saving changes (a frozen clock:
every instant is passed in, nothing waits), the zone in the digest, and the check of an unknown zone."""

import datetime as dt

import pytest
from django.core.checks import Error

from queues.periodic.declare import Schedule, check_schedules
from queues.periodic.plan import latest_ticks, plan_runs

UTC = dt.UTC


def at(text):
    """An aware UTC datetime from 'YYYY-MM-DD HH:MM'."""
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def ticks(schedule, start, count):
    """The next ``count`` runs after ``start``, as 'YYYY-MM-DD HH:MM' in UTC."""
    found, cursor = [], at(start)
    for _ in range(count):
        cursor = schedule.next_run(cursor)
        found.append(f"{cursor:%Y-%m-%d %H:%M}")
    return found


def cron(expression, tz):
    return Schedule(id="z", queue="default", func="tests.jobs.lifecycle.quick", cron=expression, tz=tz)


def test_a_cron_schedule_runs_at_the_wall_clock_time_of_its_zone():
    moscow = cron("0 3 * * *", "Europe/Moscow")  # UTC+3, no DST
    assert ticks(moscow, "2026-01-01 10:00", 2) == ["2026-01-02 00:00", "2026-01-03 00:00"]
    assert ticks(cron("0 3 * * *", "UTC"), "2026-01-01 10:00", 1) == ["2026-01-02 03:00"]


@pytest.mark.parametrize(
    ("tz", "start", "expected"),
    [
        # Berlin springs forward on 2026-03-29 at 02:00 CET (01:00 UTC) to 03:00 CEST: 02:30 does not exist
        ("Europe/Berlin", "2026-03-27 12:00", ["2026-03-28 01:30", "2026-03-29 01:00", "2026-03-30 00:30"]),
        # New York springs forward on 2026-03-08 at 02:00 EST (07:00 UTC) to 03:00 EDT
        ("America/New_York", "2026-03-06 12:00", ["2026-03-07 07:30", "2026-03-08 07:00", "2026-03-09 06:30"]),
    ],
)
def test_a_wall_time_skipped_by_spring_forward_runs_once_at_the_first_valid_minute_after(tz, start, expected):
    assert ticks(cron("30 2 * * *", tz), start, 3) == expected


def test_several_ticks_in_a_skipped_hour_run_once_together():
    quarterly = cron("*/15 2 * * *", "Europe/Berlin")
    assert ticks(quarterly, "2026-03-28 23:00", 3) == ["2026-03-29 01:00", "2026-03-30 00:00", "2026-03-30 00:15"]


@pytest.mark.parametrize(
    ("tz", "start", "expected"),
    [
        # Berlin falls back on 2026-10-25 at 03:00 CEST (01:00 UTC) to 02:00 CET: 02:30 happens twice
        ("Europe/Berlin", "2026-10-23 12:00", ["2026-10-24 00:30", "2026-10-25 00:30", "2026-10-26 01:30"]),
        # New York falls back on 2026-11-01 at 02:00 EDT (06:00 UTC) to 01:00 EST: 01:30 happens twice
        ("America/New_York", "2026-10-30 12:00", ["2026-10-31 05:30", "2026-11-01 05:30", "2026-11-02 06:30"]),
    ],
)
def test_a_wall_time_repeated_by_fall_back_runs_once_at_its_first_occurrence(tz, start, expected):
    expression = "30 2 * * *" if tz == "Europe/Berlin" else "30 1 * * *"
    assert ticks(cron(expression, tz), start, 3) == expected


def test_an_hourly_schedule_runs_each_wall_hour_once_across_fall_back():
    hourly = cron("0 * * * *", "Europe/Berlin")
    assert ticks(hourly, "2026-10-24 23:30", 4) == [
        "2026-10-25 00:00",  # 02:00 CEST
        "2026-10-25 02:00",  # 03:00 CET: the second 02:00 (01:00 UTC) is not run again
        "2026-10-25 03:00",
        "2026-10-25 04:00",
    ]
    # a scheduler polling in the repeated hour's second pass finds no tick there either
    assert ticks(hourly, "2026-10-25 01:10", 1) == ["2026-10-25 02:00"]


def test_missed_ticks_across_a_dst_change_are_counted_once_each():
    nightly = Schedule(
        id="z",
        queue="default",
        func="tests.jobs.lifecycle.quick",
        cron="30 2 * * *",
        tz="Europe/Berlin",
        missed={"catch_up": 5},
    )
    runs, following = plan_runs(nightly, at("2026-03-28 01:30"), at("2026-03-30 12:00"))
    assert [f"{t:%Y-%m-%d %H:%M}" for t in runs] == ["2026-03-28 01:30", "2026-03-29 01:00", "2026-03-30 00:30"]
    assert following == at("2026-03-31 00:30")
    fall = latest_ticks(nightly, at("2026-10-24 00:30"), at("2026-10-25 01:10"), 5)  # in the second 02:xx
    assert [f"{t:%Y-%m-%d %H:%M}" for t in fall] == ["2026-10-24 00:30", "2026-10-25 00:30"]


def test_the_zone_is_part_of_the_digest_and_utc_keeps_the_digest_of_a_schedule_without_one():
    plain = Schedule(id="z", queue="default", func="f", cron="0 3 * * *")
    assert plain.digest() == Schedule(id="z", queue="default", func="f", cron="0 3 * * *", tz="UTC").digest()
    assert "tz" not in plain.spec()
    moved = Schedule(id="z", queue="default", func="f", cron="0 3 * * *", tz="Europe/Moscow")
    assert moved.digest() != plain.digest()
    assert moved.spec()["tz"] == "Europe/Moscow"


def test_an_unknown_zone_or_a_zone_on_an_interval_is_a_check_error(settings, lifecycle_queue):
    settings.OPTIMA_SCHEDULES = [
        {"id": "a", "queue": "lifecycle", "func": "tests.jobs.lifecycle.quick", "cron": "0 3 * * *", "tz": "Mars/Base"},
        {"id": "b", "queue": "lifecycle", "func": "tests.jobs.lifecycle.quick", "interval": 60, "tz": "Europe/Paris"},
        {
            "id": "c",
            "queue": "lifecycle",
            "func": "tests.jobs.lifecycle.quick",
            "cron": "0 3 * * *",
            "tz": "Asia/Tokyo",
        },
    ]
    assert check_schedules() == [
        Error(
            "OPTIMA_SCHEDULES['a']['tz'] is 'Mars/Base', which is not a known IANA time zone.",
            hint="Give an IANA time zone name, e.g. 'Europe/Moscow' or 'America/New_York' (or leave 'tz' out "
            "for UTC); where the system has no zone database, install the tzdata package.",
            id="queues.E038",
        ),
        Error(
            "OPTIMA_SCHEDULES['b'] has 'tz': 'Europe/Paris' with an 'interval': a zone moves cron ticks only.",
            hint="Leave 'tz' out of an interval schedule, or give a 'cron' expression to run at the zone's "
            "wall-clock times.",
            id="queues.E039",
        ),
    ]
    settings.OPTIMA_SCHEDULES = settings.OPTIMA_SCHEDULES[2:]
    assert check_schedules() == []
