"""Issue 33, helper "live": a job list refreshes itself while it is open (queues/static/queues/live.js), in a
real Chromium against the live server, a real Redis and a real worker.

The page's clock is Playwright's (``page.clock``): a poll happens when the test moves the clock on, never
because a test waited long enough, so "no poll while off / hidden" is a fact of the page's timers, not of a
sleep. ``window.queuesLive.polls`` counts the polls live.js starts; the requests of the JSON view are
counted too, as the server saw them asked.
"""

import pytest
from playwright.sync_api import expect

import queues
from queues.catalog.lookup import OptimaJob
from tests.support import wait_for
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUEUED = "/admin/queues/queues/1/"  # the queued list of "default" (django-rq's index: queues sorted by name)
STEP = 5_000 + 100  # one refresh period (QUEUE_BOARD_REFRESH_SECONDS' default, 5 s) and a little, in ms


def open_list(page, live_server, path=QUEUED):
    """The list, logged in, on Playwright's clock; returns the list of JSON requests the page made."""
    page.clock.install()
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "format=json" in request.url else None)
    log_in(page, live_server, next_url=QUEUED)
    if path != QUEUED:
        page.goto(f"{live_server.url}{path}")
    expect(page.locator("#live-toggle")).to_have_text("Live: on")
    return asked


def polls(page):
    return page.evaluate("window.queuesLive.polls")


def tab(page, state):
    return page.locator(f"#tab-{state} .queue-tab-count")


def test_an_open_list_shows_the_jobs_a_worker_finished_without_a_reload(
    page, live_server, prod, operator, start_worker, queue_redis
):
    jobs = [queues.enqueue("default", "tests.jobs.sample.add", i, i) for i in range(3)]
    open_list(page, live_server)
    expect(tab(page, "queued")).to_have_text("3")
    expect(tab(page, "finished")).to_have_text("0")
    assert page.locator("#result_list tbody input.action-select").count() == 3
    page.evaluate("window.notReloaded = true")
    start_worker("default", "--burst").wait(60)
    wait_for(
        lambda: all(OptimaJob.fetch(j.id, connection=queue_redis).get_status() == "finished" for j in jobs),
        timeout=60,
        message="the jobs to finish",
    )
    page.clock.run_for(STEP)
    expect(tab(page, "finished")).to_have_text("3")
    expect(tab(page, "queued")).to_have_text("0")
    expect(page.locator("#result_list tbody")).to_contain_text("No queued jobs.")
    assert page.evaluate("window.notReloaded") is True  # the same page: swapped, not reloaded


def test_the_toggle_stops_the_polling_and_is_remembered(page, live_server, prod, operator, queue_redis):
    queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    asked = open_list(page, live_server)
    page.clock.run_for(STEP)
    wait_for(lambda: len(asked) == 1, message="the first poll's request")
    assert polls(page) == 1
    page.click("#live-toggle")
    expect(page.locator("#live-toggle")).to_have_text("Live: off")
    assert page.evaluate("localStorage.getItem('queues.live')") == "off"
    page.clock.run_for(12 * STEP)
    assert polls(page) == 1
    page.reload()  # remembered: the next page starts off
    expect(page.locator("#live-toggle")).to_have_text("Live: off")
    page.clock.run_for(12 * STEP)
    assert page.evaluate("window.queuesLive.polls") == 0
    assert len(asked) == 1
    page.click("#live-toggle")  # on again: it polls again
    expect(page.locator("#live-toggle")).to_have_text("Live: on")
    page.clock.run_for(STEP)
    wait_for(lambda: len(asked) == 2, message="the poll after turning it on")
    assert polls(page) == 1


def test_a_hidden_tab_does_not_poll_and_catches_up_when_shown(page, live_server, prod, operator, queue_redis):
    # The tab is hidden from the start (as a page opened in a background tab is), then shown, then hidden.
    page.add_init_script('Object.defineProperty(document, "hidden", {configurable: true, get: () => true})')
    asked = open_list(page, live_server)
    show = """hidden => {
        Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
        document.dispatchEvent(new Event("visibilitychange"));
    }"""
    page.clock.run_for(12 * STEP)
    assert polls(page) == 0 and asked == []
    queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    page.evaluate(show, False)  # shown: brought up to date at once, then every period
    expect(tab(page, "queued")).to_have_text("1")
    assert polls(page) == 1
    page.clock.run_for(STEP)
    wait_for(lambda: polls(page) == 2, message="the next poll")
    wait_for(lambda: len(asked) == 2, message="the next poll's request")
    page.evaluate(show, True)  # hidden again: the next poll is called off
    page.clock.run_for(12 * STEP)
    assert polls(page) == 2 and len(asked) == 2


def test_selection_survives_a_refresh_and_select_all_across_pages_reaches_the_confirmation(
    page, live_server, prod, operator, queue_redis
):
    for i in range(30):
        queues.enqueue("default", "tests.jobs.sample.add", i, i)
    open_list(page, live_server, f"{QUEUED}?per_page=25&order=newest")  # a new job comes in on top
    rows = page.locator("#result_list tbody input.action-select")
    chosen = rows.first.get_attribute("value")
    rows.first.check()
    expect(page.locator("#action-counter")).to_have_text("1 of 25 selected")
    newcomer = queues.enqueue("default", "tests.jobs.sample.add", 99, 99)
    page.clock.run_for(STEP)
    expect(tab(page, "queued")).to_have_text("31")
    expect(rows.first).to_have_value(newcomer.id)
    expect(rows.first).not_to_be_checked()
    expect(page.locator(f'input.action-select[value="{chosen}"]')).to_be_checked()  # kept, by value
    expect(page.locator("#action-counter")).to_have_text("1 of 25 selected")
    expect(page.locator("#select-across")).to_be_hidden()
    page.check("#action-toggle")
    expect(page.locator("#select-across")).to_have_text("Select all 31 jobs in queued")
    page.click("#select-across")
    expect(page.locator("#select-across-clear")).to_contain_text("All 31 jobs in queued selected.")
    newest = queues.enqueue("default", "tests.jobs.sample.add", 100, 100)  # "all of them" stands, recounted
    page.clock.run_for(STEP)
    expect(rows.first).to_have_value(newest.id)
    expect(page.locator("#select-across-clear")).to_contain_text("All 32 jobs in queued selected.")
    expect(rows.first).to_be_checked()
    assert page.locator("#select-across-input").input_value() == "1"
    page.select_option("select[name=action]", "delete")
    page.click("button[name=index]")
    page.wait_for_url("**/confirm-action/1/")
    expect(page.locator("#confirm-across")).to_contain_text("Delete all 32 jobs in queued")
    assert page.locator("#confirm-form input[name=select_across]").input_value() == "1"
    assert page.locator("#confirm-form input[name=state]").input_value() == "queued"


def test_the_home_pages_queue_table_refreshes_the_same_way(page, live_server, prod, operator, queue_redis):
    page.clock.install()
    log_in(page, live_server)
    waiting = page.locator('#queue-states tr[data-queue="default"] .queue-waiting')
    expect(waiting).to_have_text("0")
    queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    page.clock.run_for(STEP)
    expect(waiting).to_have_text("1")
    expect(page.locator('#results_list tr[data-queue="default"] td').first).to_have_text("1")
