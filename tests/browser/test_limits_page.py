"""The limits page in a real browser against the live site, a real Redis and a real worker: an operator sees a
key's rate and held jobs, pauses the key (its jobs wait held while the rest of its queue runs) and resumes it
(its held jobs run), each change audited."""

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob
from queues.models import AuditEntry
from queues.producer import rates
from tests.support import wait_for
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NOOP = "tests.jobs.sample.add"
ROW = '#limit-keys tr[data-key="default:seller:7"]'


def statuses(jobs, connection):
    return [OptimaJob.fetch(job.id, connection=connection).get_status() for job in jobs]


def test_operator_pauses_a_limit_key_its_jobs_wait_held_and_resumes_it(
    page, live_server, prod, operator, queue_redis, start_worker, shoot
):
    worker = start_worker("default", "--concurrency", "4")
    first = queues.enqueue("default", NOOP, 1, 1, limit_key="seller:7", limit_rate="2/s")
    wait_for(lambda: statuses([first], queue_redis) == [JobStatus.FINISHED], timeout=60, message="the first job")

    log_in(page, live_server)
    page.click("#limits-link")
    page.wait_for_url(f"{live_server.url}/admin/queues/limits/")
    row = page.locator(ROW)
    assert row.locator(".key-rate").inner_text() == "2/s"
    assert row.locator(".key-state").inner_text() == "active"
    row.locator('input[type=submit][value="Pause seller:7"]').click()
    page.wait_for_load_state()
    assert page.locator(f"{ROW} .key-state").inner_text() == "paused"
    assert rates.is_paused(queue_redis, "default", "seller:7")

    # The key's budget is full (idle): unpaused, these would be released by their own enqueue.
    held = [queues.enqueue("default", NOOP, i, 0, limit_key="seller:7", limit_rate="2/s") for i in range(3)]
    other = queues.enqueue("default", NOOP, 2, 2)
    wait_for(lambda: statuses([other], queue_redis) == [JobStatus.FINISHED], timeout=60, message="the other job")
    assert statuses(held, queue_redis) == [JobStatus.RATE_LIMITED] * 3
    page.reload()
    assert page.locator(f"{ROW} .key-held").inner_text() == "3"
    shoot(page, "limit-keys")

    page.locator(f'{ROW} input[type=submit][value="Resume seller:7"]').click()
    page.wait_for_load_state()
    assert page.locator(f"{ROW} .key-state").inner_text() == "active"
    wait_for(
        lambda: statuses(held, queue_redis) == [JobStatus.FINISHED] * 3, timeout=60, message="the held jobs to run"
    )
    assert list(AuditEntry.objects.order_by("pk").values_list("identity", "action", "queue")) == [
        ("operator", "pause_key", "default"),
        ("operator", "resume_key", "default"),
    ]
    assert worker.stop() == 0, worker.output()


def test_operator_pauses_and_resumes_a_limit_key_without_a_rate(page, live_server, prod, operator, queue_redis):
    jobs = [queues.enqueue("default", NOOP, i, 0, limit_key="cabinet:1", limit_concurrency=1) for i in range(3)]
    log_in(page, live_server)
    page.goto(f"{live_server.url}/admin/queues/limits/")
    row = page.locator('#limit-keys tr[data-key="default:cabinet:1"]')
    assert [row.locator(f".key-{c}").inner_text() for c in ("rate", "concurrency", "running", "held", "state")] == [
        "—",
        "1",
        "1",
        "2",
        "active",
    ]
    row.locator('input[type=submit][value="Pause cabinet:1"]').click()
    page.wait_for_load_state()
    assert row.locator(".key-state").inner_text() == "paused"
    assert row.locator(".key-held").inner_text() == "2"
    assert rates.is_paused(queue_redis, "default", "cabinet:1")

    row.locator('input[type=submit][value="Resume cabinet:1"]').click()
    page.wait_for_load_state()
    assert row.locator(".key-state").inner_text() == "active"
    assert statuses(jobs, queue_redis) == [JobStatus.QUEUED, JobStatus.RATE_LIMITED, JobStatus.RATE_LIMITED]
    assert list(AuditEntry.objects.order_by("pk").values_list("action", "queue")) == [
        ("pause_key", "default"),
        ("resume_key", "default"),
    ]
