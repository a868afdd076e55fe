"""Connections: lazy, bounded in time, separate clients, passwords never shown."""
import logging
import socket

import pytest
from django.test import Client, override_settings
from django.urls import path
from django.views.debug import ExceptionReporter

import queues
from queues.connection import get_cache_connection, get_connection, mask_url
from tests.jobs import sample


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_redis():
    """A TCP port that accepts connections and never answers (a hung Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(50)
    yield f"redis://:s3cr3t-pw@127.0.0.1:{server.getsockname()[1]}/0"
    server.close()


@pytest.mark.parametrize(
    "url, masked",
    [
        ("redis://:s3cr3t@host:6379/0", "redis://:***@host:6379/0"),
        ("rediss://app:s3cr3t@host:6380/2", "rediss://app:***@host:6380/2"),
        ("redis://host:6379/0", "redis://host:6379/0"),
    ],
)
def test_mask_url_hides_the_password_only(url, masked):
    assert mask_url(url) == masked


def test_queue_and_cache_clients_are_distinct_with_distinct_pools():
    assert get_connection() is not get_cache_connection()
    assert get_connection().connection_pool is not get_cache_connection().connection_pool


def test_repr_of_the_client_excludes_the_password():
    with override_settings(QUEUES_REDIS_URL="redis://user:s3cr3t-pw@127.0.0.1:6379/0"):
        assert "s3cr3t-pw" not in repr(get_connection())
        assert "***" in repr(get_connection())


def test_repr_of_the_rq_queues_setting_excludes_the_password():
    from django.conf import settings

    with override_settings(QUEUES_REDIS_URL="redis://user:s3cr3t-pw@127.0.0.1:6379/0"):
        assert settings.RQ_QUEUES["default"]["PASSWORD"] == "s3cr3t-pw"  # django-rq needs it ...
        assert repr(settings.RQ_QUEUES) == "RQQueuesSetting()"  # ... diffsettings and error pages never show it


def test_enqueue_with_redis_down_raises_queue_unavailable_with_masked_url_and_writes_nothing(caplog):
    url = f"redis://:s3cr3t-pw@127.0.0.1:{closed_port()}/0"
    with override_settings(QUEUES_REDIS_URL=url), caplog.at_level(logging.DEBUG):
        with pytest.raises(queues.QueueUnavailable) as excinfo:
            queues.enqueue("default", sample.add, 1, 2)
    message = str(excinfo.value)
    assert "s3cr3t-pw" not in message
    assert ":***@127.0.0.1" in message
    assert "s3cr3t-pw" not in caplog.text


def test_enqueue_to_a_redis_that_never_answers_raises_queue_unavailable(silent_redis):
    with override_settings(QUEUES_REDIS_URL=silent_redis):
        with pytest.raises(queues.QueueUnavailable) as excinfo:
            queues.enqueue("default", sample.add, 1, 2)
    assert "TimeoutError" in str(excinfo.value)
    assert "s3cr3t-pw" not in str(excinfo.value)


@pytest.mark.django_db
def test_site_serves_pages_while_redis_is_down():
    url = f"redis://127.0.0.1:{closed_port()}/0"
    with override_settings(QUEUES_REDIS_URL=url, CACHE_REDIS_URL=url):
        response = Client().get("/admin/login/")
    assert response.status_code == 200


def _password():
    return "-".join(["s3cr3t", "joined"])


def test_error_pages_mask_passwords_in_url_settings(rf):
    # Built at run time and kept out of the frame's locals: the page shows source lines and locals.
    with override_settings(QUEUES_REDIS_URL=f"redis://:{_password()}@127.0.0.1:1/0", DEBUG=True):
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            import sys

            html = ExceptionReporter(rf.get("/"), *sys.exc_info()).get_traceback_html()
    assert _password() not in html
    assert "redis://:***@127.0.0.1:1/0" in html


# A view that fails with secrets in its local variables, the way a database or Redis outage does.
# The secrets are built at run time: the error page shows the source lines around each frame.
DB_PASSWORD = "".join(["s3cret", "pw"])
PG_PASSWORD = "".join(["pg-", "s3cret"])
API_TOKEN = "".join(["tok-", "s3cret"])


def _failing_view(request):
    settings_dict = {"ENGINE": "django.db.backends.postgresql", "NAME": "optima", "USER": "optima",
                     "PASSWORD": DB_PASSWORD, "OPTIONS": {"api_key": API_TOKEN}}
    database_url = f"postgres://optima:{PG_PASSWORD}@db.internal:5432/optima"
    environ = {"DATABASE_URL": database_url, "PATH": "/usr/bin"}
    attempts = [(database_url, 1)]
    message = f"could not connect to {database_url}"
    api_token = API_TOKEN
    assert settings_dict and environ and attempts and message and api_token
    raise ConnectionError("database is down")


def _failing_view_with_awkward_locals(request):
    loop = {"password": DB_PASSWORD}
    loop["self"] = loop
    deep = [{"url": f"redis://:{PG_PASSWORD}@h:1/0"}]
    for _ in range(20):
        deep = [deep]
    assert loop and deep
    raise ConnectionError("redis is down")


urlpatterns = [path("fails/", _failing_view), path("fails-awkwardly/", _failing_view_with_awkward_locals)]


@pytest.mark.django_db
def test_the_debug_error_page_masks_secrets_in_local_variables():
    client = Client(raise_request_exception=False)
    with override_settings(DEBUG=True, ROOT_URLCONF=__name__):
        response = client.get("/fails/", HTTP_X_DATABASE_URL=f"postgres://optima:{PG_PASSWORD}@db.internal/optima")
    html = response.content.decode()
    assert response.status_code == 500
    assert "ConnectionError" in html and "settings_dict" in html  # the debug page, with the locals
    for secret in (DB_PASSWORD, PG_PASSWORD, API_TOKEN):
        assert secret not in html
    assert html.count("postgres://optima:***@db.internal:5432/optima") == 4  # database_url, environ, attempts, message
    assert "could not connect to postgres://optima:***@db.internal:5432/optima" in html
    assert "postgres://optima:***@db.internal/optima" in html  # request.META
    assert "&#x27;PASSWORD&#x27;: &#x27;********************&#x27;" in html
    assert "&#x27;api_key&#x27;: &#x27;********************&#x27;" in html


@pytest.mark.django_db
def test_the_debug_error_page_survives_cyclic_and_deeply_nested_locals_without_showing_their_secrets():
    client = Client(raise_request_exception=False)
    with override_settings(DEBUG=True, ROOT_URLCONF=__name__):
        response = client.get("/fails-awkwardly/")
    html = response.content.decode()
    assert response.status_code == 500
    assert "ConnectionError" in html
    assert DB_PASSWORD not in html and PG_PASSWORD not in html
    assert "&#x27;self&#x27;: &#x27;&lt;recursion&gt;&#x27;" in html
    assert "&lt;list nested deeper than 8 levels: not shown&gt;" in html
