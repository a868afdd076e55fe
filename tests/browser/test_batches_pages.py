"""The Batches pages in a real browser against the live site and a real Redis (issue 34, section 4): an
operator opens the Batches page from the panel's home, a batch, one of its members' job page (which links
back to its batch), and cancels the batch through its confirmation page."""

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob
from queues.models import AuditEntry
from tests.support.browser import log_in
from tests.support.worker import run_burst

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MEMBER = "tests.jobs.batches.member"


def test_operator_goes_from_the_batches_page_to_a_member_and_cancels_the_batch(
    page, live_server, prod, operator, queue_redis, tmp_path, shoot
):
    record = str(tmp_path / "runs.txt")
    with queues.batch(description="sync of <seller> 7") as b:
        done = queues.enqueue("default", MEMBER, record, 1)
        later = queues.enqueue("default", MEMBER, record, 2, delay=3600)
    run_burst(queue_redis)  # one member finished, one scheduled an hour away

    log_in(page, live_server)
    page.click("#batches-link")
    page.wait_for_url(f"{live_server.url}/admin/queues/batches/")
    row = page.locator(f'#batches tr[data-batch="{b.id}"]')
    assert row.locator(".batch-description").inner_text() == "sync of <seller> 7"  # shown as text
    assert row.locator(".batch-state").inner_text() == "running"
    assert row.locator("progress").get_attribute("value") == "1"
    shoot(page, "batches")

    row.locator("a.batch-link").click()
    page.wait_for_url(f"{live_server.url}/admin/queues/batches/{b.id}/")
    assert page.locator("#batch-counts").inner_text().startswith("2 total: 1 finished, 0 dead, 1 pending")
    shoot(page, "batch")
    page.locator('#batch-tabs a[data-state="finished"]').click()
    page.wait_for_url(f"{live_server.url}/admin/queues/batches/{b.id}/?state=finished")
    page.locator("a.member-link", has_text=done.id).click()
    page.wait_for_url(f"{live_server.url}/admin/queues/queues/*/{done.id}/")
    assert page.locator("#job-batch-state").inner_text() == "running"
    shoot(page, "job-batch")
    page.click("#job-batch-link")
    page.wait_for_url(f"{live_server.url}/admin/queues/batches/{b.id}/")

    page.click("#cancel-batch")
    page.wait_for_url(f"{live_server.url}/admin/queues/batches/{b.id}/cancel/")
    assert "Are you sure you want to Cancel batch" in page.locator("#content").inner_text()
    assert queues.batch_state(b.id).state == "running"  # the confirmation page changed nothing
    page.get_by_role("button", name="Yes, cancel it").click()
    page.wait_for_url(f"{live_server.url}/admin/queues/batches/{b.id}/")
    assert "1 waiting member(s) canceled" in page.locator(".messagelist").inner_text()
    assert page.locator("#batch-state").inner_text() == "canceled"
    assert page.locator("#cancel-batch").count() == 0
    assert OptimaJob.fetch(later.id, connection=queue_redis).get_status(refresh=True) == JobStatus.CANCELED
    assert list(AuditEntry.objects.values_list("identity", "action", "job_ids", "outcome")) == [
        ("operator", "cancel_batch", [b.id, later.id], "ok")
    ]
