"""The API docs pages (issue 24): Swagger UI and Redoc render /api/schema/ for a browser, with their assets
served from this site's static files (drf-spectacular-sidecar), never from a CDN, so they work offline."""

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client


@pytest.mark.parametrize("url", ["/api/docs/", "/api/redoc/"])
def test_the_api_docs_page_answers_200_names_its_schema_url_and_loads_nothing_from_a_cdn(url):
    response = Client().get(url)
    html = response.content.decode()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert '"/api/schema/"' in html
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
    assert assets, html[:500]
    assert [a for a in assets if not a.startswith("/static/")] == []
    for asset in assets:
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not among the static files"


def test_the_sites_root_the_admins_view_site_link_leads_to_the_queue_panel():
    response = Client().get("/")
    assert (response.status_code, response["Location"]) == (302, "/admin/queues/")
