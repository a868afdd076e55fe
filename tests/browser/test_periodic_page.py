"""The periodic jobs page in a real browser against the live site and a real Redis: an operator
sees a schedule's next run, pauses it and resumes it."""

import datetime as dt

import pytest

from queues.models import AuditEntry
from queues.periodic import schedules
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_operator_sees_the_next_run_pauses_and_resumes_a_schedule(
    page, live_server, prod, operator, queue_redis, lifecycle_schedules, shoot
):
    schedules.register(queue_redis)
    next_run = dt.datetime.fromtimestamp(queue_redis.zscore(schedules.scheduled_jobs_key(), "schedule-nightly"), dt.UTC)
    log_in(page, live_server)
    page.click("#periodic-link")
    page.wait_for_url(f"{live_server.url}/admin/queues/periodic/")
    row = page.locator('#periodic-jobs tr[data-schedule="nightly"]')
    assert row.locator(".schedule-next").inner_text() == f"{next_run:%Y-%m-%d %H:%M:%S}"
    assert row.locator(".schedule-next-local").count() == 0  # a schedule in UTC: its next run is shown once
    headers = page.locator("#periodic-jobs thead th").all_text_contents()
    assert headers[7] == "Next run (its zone, then UTC)"
    assert row.locator(".schedule-state").inner_text() == "active"
    shoot(page, "periodic-jobs")

    row.locator('input[type=submit][value="Pause nightly"]').click()
    page.wait_for_load_state()
    row = page.locator('#periodic-jobs tr[data-schedule="nightly"]')
    assert row.locator(".schedule-state").inner_text() == "paused"
    assert "Periodic schedule nightly paused." in page.locator("ul.messagelist").inner_text()
    assert schedules.paused_ids(queue_redis) == {"nightly"}

    row.locator('input[type=submit][value="Resume nightly"]').click()
    page.wait_for_load_state()
    assert page.locator('#periodic-jobs tr[data-schedule="nightly"] .schedule-state').inner_text() == "active"
    assert schedules.paused_ids(queue_redis) == set()
    assert list(AuditEntry.objects.order_by("pk").values_list("identity", "action")) == [
        ("operator", "pause-schedule"),
        ("operator", "resume-schedule"),
    ]
