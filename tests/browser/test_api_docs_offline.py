"""The API docs pages work offline: a real browser opening /api/redoc/ and /api/docs/ sends nothing to another host
and still shows the API (templates/drf_spectacular/redoc.html). Redoc's bundle builds an image of cdn.redoc.ly (its
"API docs by Redocly" logo) with no option to leave it out: the page's Content-Security-Policy refuses it before it
leaves the browser (Playwright reports it as a request that failed with ``csp``); Google Fonts are not asked at all.
"""

from urllib.parse import urlsplit

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("path", ["/api/redoc/", "/api/docs/"])
def test_the_api_docs_page_sends_nothing_to_another_host_and_shows_the_api(page, live_server, path):
    here = urlsplit(live_server.url).netloc
    sent = {}  # url -> "csp" when the page's own policy refused it, else None (it went out)

    def elsewhere(request):
        return urlsplit(request.url).scheme in ("http", "https") and urlsplit(request.url).netloc != here

    page.on("request", lambda request: elsewhere(request) and sent.setdefault(request.url, None))
    page.on("requestfailed", lambda request: elsewhere(request) and sent.update({request.url: request.failure}))
    page.goto(live_server.url + path)
    page.get_by_text("Optima feature API").first.wait_for()
    page.get_by_text("/features/orders/sync/").first.wait_for(state="attached")
    page.wait_for_load_state("networkidle")
    assert {url: why for url, why in sent.items() if why != "csp"} == {}
    assert not any("fonts.googleapis.com" in url or "fonts.gstatic.com" in url for url in sent)
