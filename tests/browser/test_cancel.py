"""An operator cancels a queued job from the panel in a real browser (issue 13, item 2): from the
job's page, its Cancel link, then django-rq's confirmation page."""

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob
from queues.models import AuditEntry
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_operator_cancels_a_queued_job_and_its_page_shows_it_canceled(
    page,
    live_server,
    prod,
    operator,
    queue_redis,
):
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    job_page = f"/admin/queues/queues/1/{job.id}/"
    log_in(page, live_server, job_page)
    page.get_by_role("link", name="Cancel this job").click()
    page.wait_for_url(f"{live_server.url}{job_page}cancel/")
    assert "Are you sure you want to Cancel" in page.locator("#content").inner_text()
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status(refresh=True) == JobStatus.QUEUED
    page.get_by_role("button", name="Cancel 1 job").click()
    page.wait_for_url(f"{live_server.url}{job_page}")
    assert "Canceled 1 job." in page.locator(".messagelist").inner_text()
    assert "canceled" in page.locator("#content").inner_text().lower()
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status(refresh=True) == JobStatus.CANCELED
    assert list(AuditEntry.objects.values_list("identity", "action", "job_ids", "outcome")) == [
        ("operator", "cancel", [job.id], "ok")
    ]
