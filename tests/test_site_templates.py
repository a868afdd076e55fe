"""The site's own templates (templates/): the admin's title and header for Optima, the 404, 500 and 503 pages."""

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import include, path

from optima_site.urls import urlpatterns as site_urlpatterns


def broken(request):
    raise ZeroDivisionError("a bug in a view")


def database_gone(request):
    raise OperationalError("database is locked")


# The site's URLs plus two views that fail (this module is the test's ROOT_URLCONF).
urlpatterns = [
    path("test-broken/", broken),
    path("test-database-gone/", database_gone),
    path("", include(site_urlpatterns)),
]


@pytest.fixture
def site(settings):
    settings.ROOT_URLCONF = __name__
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["testserver"]
    return Client(raise_request_exception=False)


@pytest.mark.django_db
def test_an_unknown_address_answers_the_sites_404_page(site):
    response = site.get("/no/such/page/")
    assert response.status_code == 404
    assert [t.name for t in response.templates][:2] == ["404.html", "error_page.html"]
    body = response.content.decode()
    assert "Page not found" in body
    assert "<code>/no/such/page/</code>" in body
    assert "Optima queues" in body


@pytest.mark.django_db
def test_a_view_that_raises_answers_the_sites_500_page(site):
    response = site.get("/test-broken/")
    assert response.status_code == 500
    body = response.content.decode()
    assert "Server error" in body
    assert "Optima queues" in body
    assert "ZeroDivisionError" not in body and "a bug in a view" not in body


@pytest.mark.django_db
def test_a_database_that_does_not_answer_gives_the_sites_503_page(site):
    response = site.get("/test-database-gone/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    body = response.content.decode()
    assert "Service unavailable" in body
    assert "database did not answer" in body
    assert "Optima queues" in body
    assert "database is locked" not in body


@pytest.mark.django_db
def test_any_other_exception_is_still_a_500_not_a_503(site):
    assert site.get("/test-broken/").status_code == 500


@pytest.mark.django_db
def test_the_admin_carries_optimas_title_and_header(admin_client):
    response = admin_client.get("/admin/")
    assert response.status_code == 200
    body = response.content.decode()
    assert '<div id="site-name"><a href="/admin/">Optima queues</a></div>' in body
    assert "<title>Site administration | Optima queues</title>" in body
    assert "Django administration" not in body


@pytest.mark.django_db
def test_the_admins_sign_in_page_carries_optimas_header(client):
    body = client.get("/admin/login/").content.decode()
    assert "Optima queues" in body
    assert "Django administration" not in body


@pytest.mark.django_db
def test_with_debug_on_a_database_error_keeps_djangos_technical_page(site, settings):
    settings.DEBUG = True
    response = site.get("/test-database-gone/")
    assert response.status_code == 500
    assert "database is locked" in response.content.decode()
