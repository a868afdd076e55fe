"""An operator looks for a job by an argument in the panel's Search page, in a real browser."""

import pytest

import queues
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.usefixtures("prod", "operator")
def test_operator_types_an_argument_and_opens_the_job_it_finds(page, live_server, shoot):
    jobs = queues.enqueue_many("default", "tests.jobs.sample.fail", [(f"cabinet {i}",) for i in range(40)])
    log_in(page, live_server)
    page.locator("#search-link").click()
    page.wait_for_url("**/admin/queues/search/")
    page.fill("#search-text", "cabinet 17")
    page.select_option("#search-queue", "default")
    page.locator('#search-jobs input[type="submit"]').click()
    page.wait_for_url("**/admin/queues/search/?q=cabinet+17*")
    links = page.locator("#search-results a.job-link")
    assert links.count() == 1
    assert "Scanned 40 of 40" in page.locator("#scan-note").inner_text()
    shoot(page, "panel-search")
    links.first.click()
    page.wait_for_url(f"**/{jobs[17].id}/")
    assert "cabinet 17" in page.locator("#content").inner_text()
