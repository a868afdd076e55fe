"""Who gets into the queue panel, and who may change anything there: the access matrix.

Rows: anonymous, staff without permission, staff with view only, staff with act, basic auth right,
basic auth wrong. Columns: dev and prod mode; viewing (GET of the home page and of a django-rq
page) and acting (POST pause). The decision reads settings.OPTIMA_ENV at request time.
"""

import pytest
from django.core.checks import Warning, run_checks
from django.test import Client

from queues.worker import pause
from tests.support.panel import BASIC_PASSWORD, BASIC_USER, basic_header, dead_job, make_staff

HOME = "/admin/queues/"
PAUSE = "/admin/queues/pause/default/"
RQ_PAGE = "/admin/queues/queues/1/"  # django-rq's job list of 'default' (queues sorted by name)

pytestmark = pytest.mark.django_db

# who -> (view status, act status) in prod mode with basic auth configured.
PROD = {
    "anonymous": (401, 401),
    "staff_without_permission": (403, 403),
    "staff_view_only": (200, 403),
    "staff_act": (200, 302),
    "basic_right": (200, 302),
    "basic_wrong": (401, 401),
}


@pytest.fixture
def prod(settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = BASIC_PASSWORD
    return settings


@pytest.fixture
def client_for(django_user_model):
    def make(who):
        client = Client()
        extra = {}
        if who == "staff_without_permission":
            client.force_login(make_staff(django_user_model, who))
        elif who == "staff_view_only":
            client.force_login(make_staff(django_user_model, who, "queues.view_queue_panel"))
        elif who == "staff_act":
            client.force_login(make_staff(django_user_model, who, "queues.act_on_queue_panel"))
        elif who == "basic_right":
            extra = basic_header()
        elif who == "basic_wrong":
            extra = basic_header(password="not-the-password")
        return client, extra

    return make


@pytest.mark.parametrize("who", sorted(PROD))
def test_prod_mode_lets_in_only_whom_the_matrix_says(prod, client_for, who, queue_redis):
    client, extra = client_for(who)
    view_status, act_status = PROD[who]
    assert client.get(HOME, **extra).status_code == view_status
    assert client.get(RQ_PAGE, **extra).status_code == view_status
    response = client.post(PAUSE, **extra)
    assert response.status_code == act_status
    assert pause.is_paused("default") is (act_status == 302)


@pytest.mark.parametrize("who", sorted(PROD))
def test_dev_mode_opens_the_panel_to_everyone(settings, client_for, who, queue_redis):
    settings.OPTIMA_ENV = "dev"
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = BASIC_PASSWORD
    client, extra = client_for(who)
    assert client.get(HOME, **extra).status_code == 200
    assert client.get(RQ_PAGE, **extra).status_code == 200
    assert client.post(PAUSE, **extra).status_code == 302
    assert pause.is_paused("default") is True


def test_refusals_in_prod_answer_401_with_a_basic_challenge(prod):
    response = Client().get(HOME)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Basic realm="Optima queues", charset="UTF-8"'
    assert BASIC_PASSWORD not in response.content.decode()


def test_prod_without_basic_auth_sends_anonymous_to_the_login_page(settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = ""
    settings.QUEUE_BOARD_PASSWORD = ""
    response = Client().get(HOME)
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/queues/"


@pytest.mark.parametrize("env", ["stage", "prod"])
def test_half_configured_basic_auth_stays_off_and_is_never_open(settings, env):
    settings.OPTIMA_ENV = env
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = ""
    assert Client().get(HOME, **basic_header(password="")).status_code == 302
    assert Client().get(HOME).status_code == 302


def test_half_configured_basic_auth_is_warned_by_check_w020(settings):
    settings.QUEUE_BOARD_USER = ""
    settings.QUEUE_BOARD_PASSWORD = BASIC_PASSWORD
    warnings = [m for m in run_checks() if m.id == "queues.W020"]
    assert warnings == [
        Warning(
            "QUEUE_BOARD_PASSWORD is set but QUEUE_BOARD_USER is not: HTTP basic auth of the queue panel "
            "(/admin/queues/) stays off.",
            hint="Set QUEUE_BOARD_USER too (both from the environment), or unset QUEUE_BOARD_PASSWORD. Staff "
            "accounts with the 'Can view the queue panel' permission still get in.",
            id="queues.W020",
        )
    ]
    assert BASIC_PASSWORD not in warnings[0].msg + warnings[0].hint


@pytest.mark.parametrize("user, password", [(BASIC_USER, BASIC_PASSWORD), ("", "")])
def test_complete_or_absent_basic_auth_settings_raise_no_w020(settings, user, password):
    settings.QUEUE_BOARD_USER = user
    settings.QUEUE_BOARD_PASSWORD = password
    assert [m for m in run_checks() if m.id == "queues.W020"] == []


def test_half_configured_basic_auth_is_logged_at_start_up(settings, caplog):
    from queues.board.access import log_startup_problems

    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = ""
    with caplog.at_level("WARNING", logger="queues.board"):
        log_startup_problems()
    assert [r.getMessage() for r in caplog.records] == [
        "QUEUE_BOARD_USER is set but QUEUE_BOARD_PASSWORD is not: HTTP basic auth of the queue panel "
        "(/admin/queues/) stays off. Set QUEUE_BOARD_PASSWORD too (both from the environment), or unset "
        "QUEUE_BOARD_USER. Staff accounts with the 'Can view the queue panel' permission still get in. "
        "(queues.W020)"
    ]


@pytest.mark.parametrize("header", ["Basic !!!not-base64", "Basic " + "b3Bz", "Bearer abc"])
def test_malformed_authorization_headers_are_refused(prod, header):
    assert Client().get(HOME, HTTP_AUTHORIZATION=header).status_code == 401


def test_changes_need_post(settings, queue_redis):
    settings.OPTIMA_ENV = "dev"
    assert Client().get(PAUSE).status_code == 405
    assert pause.is_paused("default") is False


def test_changes_need_the_csrf_token(settings, queue_redis):
    settings.OPTIMA_ENV = "dev"
    client = Client(enforce_csrf_checks=True)
    assert client.post(PAUSE).status_code == 403
    assert pause.is_paused("default") is False
    client.get(HOME)
    token = client.cookies["csrftoken"].value
    assert client.post(PAUSE, {"csrfmiddlewaretoken": token}).status_code == 302
    assert pause.is_paused("default") is True


def test_view_only_staff_cannot_use_django_rq_actions(prod, django_user_model, queue_redis):
    job, _ = dead_job(row=False)
    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    detail = f"/admin/queues/queues/1/{job.id}/"
    assert client.get(detail).status_code == 200
    assert client.post(f"{detail}delete/").status_code == 403
    assert client.post(f"{detail}requeue/").status_code == 403
    assert client.post("/admin/queues/queues/1/empty/").status_code == 403
    assert client.post("/admin/queues/queues/1/failed/clear/").status_code == 403
    assert client.post("/admin/queues/queues/actions/1/", {"action": "delete", "job_ids": [job.id]}).status_code == 403
    assert queue_redis.exists(job.key) == 1


def test_django_rq_api_views_are_behind_the_same_access(prod):
    assert Client().get("/admin/queues/stats.json").status_code == 401
    assert Client().get("/admin/queues/stats.json", **basic_header()).status_code == 200


def test_django_rq_admin_entry_that_would_bypass_the_panel_is_not_mounted(django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "staffer"))
    assert client.get("/admin/django_rq/dashboard/").status_code == 404


def test_superuser_gets_in_in_prod_with_every_right(prod, django_user_model, queue_redis):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-for-tests-1"))
    assert client.get(HOME).status_code == 200
    assert client.post(PAUSE).status_code == 302
    assert pause.is_paused("default") is True


@pytest.mark.parametrize("env", ["stage", "prod"])
def test_a_short_basic_auth_password_in_stage_or_prod_is_error_e021(settings, env):
    from django.core.checks import Error

    settings.OPTIMA_ENV = env
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = "a"
    errors = [m for m in run_checks() if m.id == "queues.E021"]
    assert errors == [
        Error(
            f"QUEUE_BOARD_PASSWORD is 1 characters long; OPTIMA_ENV={env} needs at least 16: the queue panel's "
            "basic auth stays off until it is longer.",
            hint="Set QUEUE_BOARD_PASSWORD (from the environment) to a long random value, e.g. the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(24))'.",
            id="queues.E021",
        )
    ]


@pytest.mark.parametrize("env, password", [("prod", "x" * 16), ("dev", "a"), ("test", "a"), ("prod", "")])
def test_a_long_enough_password_or_an_open_environment_raises_no_e021(settings, env, password):
    settings.OPTIMA_ENV = env
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = password
    assert [m for m in run_checks() if m.id == "queues.E021"] == []


def test_a_short_password_in_prod_keeps_basic_auth_off(settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = "a"
    response = Client().get(HOME, **basic_header(password="a"))
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/queues/"
