"""The open dev panel, opened without signing in, shows one consistent state: no "Log out" (there is no session)
and no admin sidebar saying "no permission" beside a panel that works; it says the panel is open and offers the
admin's sign-in. A signed-in staff user keeps the admin's own header (queues/board/access.py, panel_context)."""

import pytest
from django.test import Client

from tests.support.panel import basic_header, make_staff

NO_PERMISSION = "have permission to view or edit anything"

# The home page, a page of ours over django-rq's reads, and django-rq's own views (rebound each_context).
PAGES = ["/admin/queues/", "/admin/queues/search/", "/admin/queues/queues/0/", "/admin/queues/queues/0/finished/"]


@pytest.fixture
def dev(settings):
    settings.OPTIMA_ENV = "dev"
    return settings


@pytest.mark.django_db
@pytest.mark.parametrize("path", PAGES)
def test_the_open_panel_without_a_login_shows_no_log_out_and_no_permission_message(dev, path):
    response = Client().get(path)
    assert response.status_code == 200
    body = response.content.decode()
    assert "logout-form" not in body and "Log out" not in body
    assert NO_PERMISSION not in body
    assert 'id="nav-sidebar"' not in body


@pytest.mark.django_db
def test_the_open_panels_home_says_it_is_open_and_offers_the_admins_sign_in(dev):
    body = Client().get("/admin/queues/").content.decode()
    assert "Signed in as" not in body
    assert "Not signed in: the panel is open (OPTIMA_ENV=dev)." in body
    assert 'href="/admin/login/?next=/admin/queues/">Sign in</a>' in body


@pytest.mark.django_db
def test_the_basic_auth_account_sees_no_log_out_either(settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = "ops"
    settings.QUEUE_BOARD_PASSWORD = "s3cret-board-pass"
    response = Client().get("/admin/queues/", **basic_header())
    assert response.status_code == 200
    body = response.content.decode()
    assert "Log out" not in body and NO_PERMISSION not in body
    assert "Signed in as <strong>basic:ops</strong>" in body


@pytest.mark.django_db
def test_a_signed_in_staff_user_keeps_the_admins_header_and_log_out(dev, django_user_model):
    user = make_staff(django_user_model, "operator", "queues.act_on_queue_panel")
    client = Client()
    client.force_login(user)
    body = client.get("/admin/queues/").content.decode()
    assert "Log out" in body
    assert "Signed in as <strong>operator</strong>" in body
