"""The dead-letter list on a laptop-sized screen: no column hidden under the filter sidebar."""

import datetime as dt

import pytest

from queues import conf
from queues.models import DeadLetter
from tests.support.browser import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LIST = "/admin/queues/deadletter/"


def overlap(a, b):
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


@pytest.mark.parametrize("width", [1400, 1280, 1800])
def test_dead_letter_message_column_is_not_covered_by_the_filter_sidebar(
    browser, live_server, prod, operator, width, shoot
):
    now = dt.datetime.now(dt.UTC)
    for i in range(3):
        DeadLetter.objects.create(
            prefix=conf.prefix(),
            queue="orders-sync",
            job_id=f"orders-sync-cabinet-{i}-0123456789abcdef",
            func_path="features.orders.jobs.sync_orders_of_a_cabinet",
            exc_type="requests.exceptions.HTTPError",
            exc_message=f"404 Client Error: Not Found for url: http://127.0.0.1:8765/api/v1/cabinets/{i}/orders "
            "?page=1&page_size=100",
            attempts_made=5,
            attempts_allowed=5,
            dead_at=now,
        )
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        log_in(page, live_server, LIST)
        shoot(page, f"deadletter-list-{width}")
        sidebar = page.locator("#changelist-filter").bounding_box()
        assert sidebar is not None and sidebar["width"] > 0  # the filters are there: the test means something
        results = page.locator("#changelist .results")
        visible = results.bounding_box()
        columns = page.locator("#result_list thead th")
        assert columns.count() == 10  # the checkbox and the nine of list_display
        cells = page.locator("#result_list tbody td.field-message")
        assert cells.count() == 3
        boxes = [columns.nth(i).bounding_box() for i in range(columns.count())]
        boxes += [cells.nth(i).bounding_box() for i in range(cells.count())]
        for box in boxes:
            # Not under the filters, and not scrolled out of the list's visible area.
            assert not overlap(box, sidebar), (box, sidebar)
            assert box["x"] + box["width"] <= visible["x"] + visible["width"] + 0.5, (box, visible)
        assert results.evaluate("div => div.scrollWidth <= div.clientWidth"), "the list scrolls sideways"
        # The message can be read: its text is not clipped in the cell.
        assert cells.first.evaluate("td => td.scrollWidth <= td.clientWidth")
        assert cells.first.inner_text().startswith("404 Client Error: Not Found for url")
        if width >= 1600:  # room enough: the filters stay a sidebar on the right
            assert sidebar["x"] >= visible["x"] + visible["width"], (sidebar, visible)
    finally:
        context.close()
