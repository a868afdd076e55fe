"""Failure groups in a real browser: from the dead-letter list to a group, and the group retried
after its confirmation page."""

import datetime as dt

import pytest
from rq.registry import FailedJobRegistry

from queues.catalog.lookup import get_queue
from queues.failures import deadletter
from queues.models import AuditEntry, DeadLetter, FailureGroup
from tests.support.browser import log_in
from tests.support.panel import dead_job

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def die(message):
    job, _ = dead_job("default", row=False)
    job.meta.update(
        {
            "exc_type": "httpx.ReadTimeout",
            "exc_message": message,
            "deaths": 1,
            "dead_at": dt.datetime.now(dt.UTC).isoformat(),
        }
    )
    job.save_meta()
    return job, deadletter.mirror(job)


def test_operator_opens_a_group_from_the_dead_letter_list_and_retries_it(
    browser, live_server, prod, operator, queue_redis, shoot
):
    made = [die(f"read timeout on https://mp.test/cabinets/{i}/orders after {i}.5 s") for i in range(3)]
    _, other = die("connection refused")
    group = FailureGroup.objects.get(fingerprint=made[0][1].fingerprint)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        log_in(page, live_server, "/admin/queues/deadletter/")
        assert page.locator("a.queues-group", has_text="seen 3 times").count() == 3
        assert page.locator("a.queues-group-new", has_text="new group").count() == 1
        page.locator("a.queues-group", has_text="seen 3 times").first.click()
        page.wait_for_url(f"{live_server.url}/admin/queues/failuregroup/{group.pk}/change/")
        assert "read timeout on <url> after <n>.<n> s" in page.locator("#content").inner_text()
        page.click("#group-rows-link")  # its rows: the three, not the other one
        page.wait_for_url(f"{live_server.url}/admin/queues/deadletter/?fingerprint={group.fingerprint}")
        assert page.locator("#result_list tbody tr").count() == 3
        page.go_back()
        page.wait_for_url(f"{live_server.url}/admin/queues/failuregroup/{group.pk}/change/")
        page.click("#group-retry-link")
        page.wait_for_selector("#confirm-summary")
        assert "Retry the 3 open dead letters of 1 failure group?" in page.locator("#confirm-summary").inner_text()
        shoot(page, "failuregroup-confirm")
        assert get_queue("default").count == 0  # nothing done before the confirmation
        page.click("#confirm-button")
        page.wait_for_url(f"{live_server.url}/admin/queues/failuregroup/{group.pk}/change/")
        assert "3 dead letters retried in 1 failure group" in page.locator("ul.messagelist").inner_text()
    finally:
        context.close()
    assert sorted(get_queue("default").get_job_ids()) == sorted(job.id for job, _ in made)
    assert FailedJobRegistry("default", connection=queue_redis).get_job_ids() == [other.job_id]
    assert dict(DeadLetter.objects.values_list("job_id", "status")) == {
        **{job.id: "retried" for job, _ in made},
        other.job_id: "open",
    }
    entry = AuditEntry.objects.get()
    assert (entry.identity, entry.action, entry.outcome) == ("operator", "retry_group", "ok")
    assert group.fingerprint in entry.detail
