"""The panel's recent history (inline SVG from the workers' once-a-minute samples) and a running
job's progress, in a real browser against the live site, a real Redis and real workers."""

import time

import pytest

import queues
from queues.catalog.lookup import OptimaJob
from queues.keyspace import keys
from queues.metrics import history
from tests.support import wait_for
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, ...


def test_operator_sees_completed_and_failed_per_minute_and_no_cron_box(
    page, live_server, prod, operator, start_worker, queue_redis, shoot
):
    # A sample a minute ago, before any job: the baseline the worker's own sample is compared to.
    history.sample(queue_redis, time.time() - 60)
    done = [queues.enqueue("default", "tests.jobs.sample.add", i, i) for i in range(2)]
    failed = queues.enqueue("default", "tests.jobs.sample.fail", "for-the-history", attempts=1)
    start_worker("default", "--burst").wait(60)
    wait_for(
        lambda: OptimaJob.fetch(failed.id, connection=queue_redis).get_status() == "failed",
        timeout=60,
        message="the failing job to fail",
    )
    assert all(OptimaJob.fetch(j.id, connection=queue_redis).get_status() == "finished" for j in done)
    # The worker sampled on its heartbeat: a second sample beside the test's own. (Not its minute lock:
    # that expires at the next minute, which a slow run crosses; it failed CI once that way.)
    assert queue_redis.llen(keys.history_key()) >= 2
    # ...at its first heartbeat, before the jobs ended: the minute's next sample (whichever worker
    # takes it) sees them. Taken here so the test need not wait for the next minute.
    sampled_at = time.time()
    history.sample(queue_redis, sampled_at)

    log_in(page, live_server)
    row = page.locator('#queue-history tr[data-queue="default"]')
    assert row.locator(".history-completed").inner_text() == "2"
    assert row.locator(".history-failed").inner_text() == "1"
    # the last hour's chart (the row also draws the 72-hour one once a ten-minute sample exists: whether it
    # does yet depends on the minute this test runs in)
    svg = row.locator("svg.queue-history:not(.queue-history-72h)")
    assert svg.is_visible()
    assert svg.locator("g.minute").count() == 60
    # The minute of that sample (the page may be drawn in the next one, then the last group and still empty).
    last = svg.locator(f'g.minute[data-minute="{int(sampled_at // 60) * 60}"]')
    assert (last.get_attribute("data-completed"), last.get_attribute("data-failed")) == ("2", "1")
    assert svg.locator("rect.failed").last.bounding_box()["height"] > 0
    assert "Cron Schedulers" not in page.locator("#content").inner_text()
    assert page.locator("#results_list").count() == 1  # django-rq's queue table is still there
    shoot(page, "panel-history")


def test_operator_sees_a_running_jobs_progress(
    page, live_server, prod, operator, start_worker, queue_redis, tmp_path, shoot
):
    release = tmp_path / "release"
    job = queues.enqueue("default", "tests.jobs.panel.report_progress_and_wait", str(release), 3, 8)
    worker = start_worker("default")
    wait_for(
        lambda: (OptimaJob.fetch(job.id, connection=queue_redis).meta.get("progress") or {}).get("step") == 3,
        timeout=60,
        message="the job to report its progress",
    )

    log_in(page, live_server, f"/admin/queues/queues/{DEFAULT}/{job.id}/")
    bar = page.locator("#job-progress progress")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("3", "8")
    assert page.locator("#job-progress .job-progress-text").inner_text() == "3 / 8"
    shoot(page, "job-progress")

    page.goto(f"{live_server.url}/admin/queues/queues/{DEFAULT}/started/")
    cell = page.locator(f'td.started-progress[data-job="{job.id}"]')
    assert (cell.locator("progress").get_attribute("value"), cell.locator("progress").get_attribute("max")) == (
        "3",
        "8",
    )

    release.write_text("go")
    wait_for(
        lambda: OptimaJob.fetch(job.id, connection=queue_redis).get_status() == "finished",
        timeout=60,
        message="the job to finish",
    )
    worker.stop()
