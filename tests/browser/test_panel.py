"""An operator's day, in a real browser against the live site, a real Redis and real workers."""

import pytest

import queues
from queues.catalog.lookup import OptimaJob
from queues.models import DeadLetter
from tests.jobs.resilience import starts
from tests.support import wait_for
from tests.support.browser import log_in
from tests.support.panel import BASIC_PASSWORD, BASIC_USER

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, orders-sync 2, repricer 3.


def cell(page, queue, css):
    return page.locator(f'#queue-states tr[data-queue="{queue}"] {css}').inner_text().strip()


def test_operator_logs_in_and_watches_the_counts_move(
    page, live_server, prod, operator, start_worker, queue_redis, shoot
):
    log_in(page, live_server)
    assert page.locator("h1").first.inner_text().startswith("Queues")
    assert cell(page, "default", ".queue-waiting") == "0"
    jobs = [queues.enqueue("default", "tests.jobs.sample.add", i, i) for i in range(3)]
    page.reload()
    assert cell(page, "default", ".queue-waiting") == "3"
    shoot(page, "panel-home")
    start_worker("default", "--burst").wait(60)
    wait_for(
        lambda: all(OptimaJob.fetch(j.id, connection=queue_redis).get_status() == "finished" for j in jobs),
        timeout=60,
        message="the jobs to finish",
    )
    page.reload()
    assert cell(page, "default", ".queue-waiting") == "0"


def test_operator_opens_a_failed_jobs_payload(page, live_server, prod, operator, start_worker, queue_redis, shoot):
    job = queues.enqueue("default", "tests.jobs.sample.fail", "payload-for-the-browser", attempts=1)
    start_worker("default", "--burst").wait(60)
    wait_for(
        lambda: OptimaJob.fetch(job.id, connection=queue_redis).get_status() == "failed",
        timeout=60,
        message="the job to fail",
    )
    log_in(page, live_server)
    assert cell(page, "default", ".queue-failed") == "1"
    page.locator('#queue-states tr[data-queue="default"] .queue-failed a').click()
    page.get_by_role("link", name=job.id).click()
    page.wait_for_url(f"**/{job.id}/")
    body = page.locator("#content").inner_text()
    assert "tests.jobs.sample.fail" in body
    assert "payload-for-the-browser" in body
    shoot(page, "failed-job")
    attempt = page.locator("#job-attempts .job-attempt").first  # the result's page is its row here
    attempt.locator("a").first.click()
    page.wait_for_url("**/#result-*")
    assert "RuntimeError: payload-for-the-browser" in attempt.inner_text()


def test_operator_finds_a_job_by_id(page, live_server, prod, operator, queue_redis, shoot):
    job = queues.enqueue("repricer", "tests.jobs.sample.add", 5, 6, delay=3600)
    log_in(page, live_server)
    page.fill("#job-id-input", job.id)
    page.click("#find-job input[type=submit]")
    page.wait_for_url(f"**/{job.id}/")
    assert "scheduled" in page.locator("#content").inner_text().lower()


def test_operator_retries_a_dead_letter_from_the_admin_and_it_succeeds(
    page, live_server, prod, operator, start_worker, queue_redis, tmp_path, shoot
):
    flag = tmp_path / "upstream-ready"
    job = queues.enqueue("default", "tests.jobs.panel.fail_until_exists", str(flag), attempts=1)
    worker = start_worker("default")
    row = wait_for(
        lambda: DeadLetter.objects.filter(job_id=job.id).first(), timeout=60, message="the dead job mirrored"
    )
    flag.write_text("fixed upstream")

    log_in(page, live_server, "/admin/queues/deadletter/")
    assert page.locator("#result_list tbody tr").count() == 1
    shoot(page, "deadletter-list")
    page.locator(f'#result_list a span[title="{job.id}"]').click()
    assert "upstream not ready" in page.locator("#content").inner_text()
    shoot(page, "deadletter-detail")
    page.click("#retry-link")
    assert "Retry 1 dead letter?" in page.locator("#confirm-summary").inner_text()
    shoot(page, "deadletter-confirm")
    page.click("#confirm-button")
    assert "1 dead letter retried." in page.locator(".messagelist").inner_text()
    wait_for(
        lambda: OptimaJob.fetch(job.id, connection=queue_redis).get_status() == "finished",
        timeout=60,
        message="the retried job to succeed",
    )
    row.refresh_from_db()
    assert row.status == "retried"
    page.goto(f"{live_server.url}/admin/queues/find/?job_id={job.id}&go=1")
    assert "finished" in page.locator("#content").inner_text().lower()
    page.goto(f"{live_server.url}/admin/queues/auditentry/")
    assert page.locator("#result_list tbody tr").count() == 1
    shoot(page, "audit-trail")
    worker.stop()


def test_operator_sees_the_job_a_busy_worker_runs_and_opens_it(
    page, live_server, prod, operator, start_worker, queue_redis, tmp_path
):
    """A worker without rq's execution records (``QUEUE_RQ_EXECUTION_RECORDS=0``, queues/jobs/execution.py): the
    worker's page finds its current job among the started entries of its queues."""
    log, release = tmp_path / "gate.jsonl", tmp_path / "release"
    job = queues.enqueue("default", "tests.jobs.resilience.wait_for_file_then_return", str(log), str(release))
    worker = start_worker("default", "--no-fork", env={"QUEUE_RQ_EXECUTION_RECORDS": "0"})
    wait_for(lambda: starts(log), timeout=60, message="the job to start")
    name = OptimaJob.fetch(job.id, connection=queue_redis).worker_name
    log_in(page, live_server, next_url=f"/admin/queues/workers/{DEFAULT}/")
    page.get_by_role("link", name=name).click()
    assert job.id in page.locator("#worker-current-job").inner_text()
    page.locator("#worker-current-job a").click()
    page.wait_for_url(f"**/{job.id}/")
    assert "tests.jobs.resilience.wait_for_file_then_return" in page.locator("#content").inner_text()
    release.touch()
    wait_for(
        lambda: OptimaJob.fetch(job.id, connection=queue_redis).get_status() == "finished",
        timeout=60,
        message="the job to finish once released",
    )
    page.goto(f"{live_server.url}/admin/queues/workers/{DEFAULT}/")
    page.get_by_role("link", name=name).click()
    assert page.locator("#worker-current-job").count() == 0  # idle: no current job shown
    worker.stop()


def test_operator_pauses_a_queue_and_workers_leave_it_alone(
    page, live_server, prod, operator, start_worker, queue_redis, shoot
):
    log_in(page, live_server)
    page.click('input[value="Pause default"]')
    assert cell(page, "default", ".queue-state") == "paused"
    held = queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    probe = queues.enqueue("content", "tests.jobs.sample.add", 2, 2)
    worker = start_worker("default", "content")
    wait_for(
        lambda: OptimaJob.fetch(probe.id, connection=queue_redis).get_status() == "finished",
        timeout=60,
        message="the active queue's job to finish",
    )
    page.reload()
    assert cell(page, "default", ".queue-waiting") == "1"
    assert OptimaJob.fetch(held.id, connection=queue_redis).get_status() == "queued"
    shoot(page, "panel-paused")
    page.click('input[value="Resume default"]')
    assert cell(page, "default", ".queue-state") == "active"
    wait_for(
        lambda: OptimaJob.fetch(held.id, connection=queue_redis).get_status() == "finished",
        timeout=60,
        message="the held job to run after resume",
    )
    page.reload()
    assert cell(page, "default", ".queue-waiting") == "0"
    worker.stop()


def test_anonymous_visitor_is_refused_in_prod_mode(page, live_server, settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = ""
    settings.QUEUE_BOARD_PASSWORD = ""
    page.goto(f"{live_server.url}/admin/queues/")
    assert page.url == f"{live_server.url}/admin/login/?next=/admin/queues/"
    assert page.locator("#id_username").is_visible()

    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = BASIC_PASSWORD
    # With basic auth on, the answer is a 401 challenge (headless Chromium shows no prompt, so the
    # request is made through the page's context).
    response = page.request.get(f"{live_server.url}/admin/queues/")
    assert response.status == 401
    assert response.headers["www-authenticate"] == 'Basic realm="Optima queues", charset="UTF-8"'
    assert "Access refused" in response.text()


def test_basic_auth_account_gets_in_in_prod_mode(browser, live_server, settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = BASIC_PASSWORD
    context = browser.new_context(http_credentials={"username": BASIC_USER, "password": BASIC_PASSWORD})
    try:
        page = context.new_page()
        response = page.goto(f"{live_server.url}/admin/queues/")
        assert response.status == 200
        assert "basic:ops" in page.locator(".queues-tools").inner_text()
    finally:
        context.close()
