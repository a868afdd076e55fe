"""Connections: lazy, bounded in time, separate clients, passwords never shown."""

import logging

import pytest
from django.test import Client, override_settings
from django.urls import path
from django.views.debug import ExceptionReporter

import queues
from queues.connection.clients import get_cache_connection, get_connection, mask_url
from tests.jobs import sample
from tests.support import closed_port


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
    settings_dict = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "optima",
        "USER": "optima",
        "PASSWORD": DB_PASSWORD,
        "OPTIONS": {"api_key": API_TOKEN},
    }
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


# --- Sentinel and WAIT settings (queues/connection/failover.py; checks queues.E040-E043) ---------------------------


def failover_errors():
    from django.core.checks import run_checks

    return [e for e in run_checks() if e.id.startswith("queues.E04")]


def test_no_sentinels_and_no_wait_is_a_good_configuration():
    assert failover_errors() == []


@override_settings(
    QUEUES_REDIS_SENTINELS="10.0.0.1:26379,[::1]:26380",
    QUEUES_REDIS_SENTINEL_MASTER="optima",
    CACHE_REDIS_SENTINELS="10.0.0.1:26379,[::1]:26380",
    CACHE_REDIS_SENTINEL_MASTER="optima",
    QUEUES_REDIS_WAIT_REPLICAS="1",
    QUEUES_REDIS_WAIT_TIMEOUT_MS="250",
)
def test_sentinels_and_wait_from_the_environment_are_a_good_configuration():
    from queues.connection import failover

    assert failover_errors() == []
    assert failover.sentinel_config("queues") == failover.SentinelConfig(
        (("10.0.0.1", 26379), ("::1", 26380)), "optima"
    )
    assert failover.wait_replicas() == (1, 250)


@override_settings(
    QUEUES_REDIS_SENTINELS="10.0.0.1:26379,10.0.0.2",
    QUEUES_REDIS_SENTINEL_MASTER="optima",
    CACHE_REDIS_SENTINELS="10.0.0.1:26379,10.0.0.2",
    CACHE_REDIS_SENTINEL_MASTER="optima",
)
def test_a_sentinel_without_port_is_e040_once_naming_the_variable_and_the_entry():
    from django.core.checks import Error

    assert failover_errors() == [
        Error(
            "REDIS_SENTINELS (setting QUEUES_REDIS_SENTINELS) has '10.0.0.2', expected host:port with a port from 1 "
            "to 65535 (e.g. 10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379).",
            hint="List the sentinels as host:port, comma-separated, in REDIS_SENTINELS; unset it to connect to the "
            "URL directly.",
            id="queues.E040",
        )
    ]


@override_settings(CACHE_REDIS_SENTINELS="cache-a:70000", CACHE_REDIS_SENTINEL_MASTER="cache")
def test_a_cache_sentinel_port_out_of_range_is_e040_naming_the_cache_variable():
    errors = failover_errors()
    assert [(e.id, e.msg.split(" has ")[0]) for e in errors] == [
        ("queues.E040", "CACHE_REDIS_SENTINELS (setting CACHE_REDIS_SENTINELS)")
    ]
    assert "'cache-a:70000'" in errors[0].msg


@override_settings(QUEUES_REDIS_SENTINELS="10.0.0.1:26379", QUEUES_REDIS_SENTINEL_MASTER="")
def test_sentinels_without_master_name_is_e041():
    errors = failover_errors()
    assert [e.id for e in errors] == ["queues.E041"]
    assert errors[0].msg == (
        "REDIS_SENTINELS (setting QUEUES_REDIS_SENTINELS) is set but REDIS_SENTINEL_MASTER "
        "(setting QUEUES_REDIS_SENTINEL_MASTER) is not."
    )
    assert "sentinel monitor <name>" in errors[0].hint


@override_settings(QUEUES_REDIS_SENTINEL_MASTER="optima")
def test_a_master_name_without_sentinels_is_e041():
    assert [e.id for e in failover_errors()] == ["queues.E041"]


@pytest.mark.parametrize("replicas", ["-1", "one", 1.5, True])
def test_wait_replicas_not_a_non_negative_integer_is_e042(settings, replicas):
    settings.QUEUES_REDIS_WAIT_REPLICAS = replicas
    errors = failover_errors()
    assert [e.id for e in errors] == ["queues.E042"]
    assert errors[0].msg == (
        f"REDIS_WAIT_REPLICAS (setting QUEUES_REDIS_WAIT_REPLICAS) is {replicas!r}, expected an integer >= 0."
    )


@pytest.mark.parametrize("timeout", ["0", "-5", "1s", None])
def test_wait_timeout_not_a_positive_integer_of_ms_is_e043(settings, timeout):
    settings.QUEUES_REDIS_WAIT_TIMEOUT_MS = timeout
    errors = failover_errors()
    assert [e.id for e in errors] == ["queues.E043"]
    assert errors[0].msg.startswith(f"REDIS_WAIT_TIMEOUT_MS (setting QUEUES_REDIS_WAIT_TIMEOUT_MS) is {timeout!r}")


@override_settings(QUEUES_REDIS_WAIT_REPLICAS="x")
def test_enqueue_with_a_bad_wait_setting_refuses_with_the_checks_message():
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=r"REDIS_WAIT_REPLICAS .* is 'x', .*\(queues\.E042\)"):
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)


@override_settings(
    QUEUES_REDIS_URL="redis://app:s3cret@10.0.0.9:6379/3",
    QUEUES_REDIS_SENTINELS="127.0.0.1:1",
    QUEUES_REDIS_SENTINEL_MASTER="optima",
)
def test_sentinel_clients_and_django_rq_config_keep_user_password_and_db_and_never_show_the_password():
    from django.conf import settings as django_settings

    from queues.connection.clients import describe
    from queues.connection.djangorq import django_rq_config

    client = get_connection()
    assert "s3cret" not in repr(client)
    assert repr(client) == "<_MaskedRedis redis://app:***@10.0.0.9:6379/3 via Sentinel master 'optima'>"
    kwargs = client.connection_pool.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("app", "s3cret", 3)
    cfg = django_rq_config()
    assert (cfg["SENTINELS"], cfg["MASTER_NAME"], cfg["DB"]) == ([["127.0.0.1", 1]], "optima", 3)
    assert cfg["CONNECTION_KWARGS"]["username"] == "app"
    assert describe() == "Sentinel master 'optima' via 127.0.0.1:1 (redis://app:***@10.0.0.9:6379/3)"
    assert "s3cret" not in repr(django_settings.RQ_QUEUES)


@override_settings(QUEUES_REDIS_SENTINELS="127.0.0.1:1", QUEUES_REDIS_SENTINEL_MASTER="optima")
def test_enqueue_with_no_sentinel_answering_raises_queue_unavailable_naming_the_sentinel_variables():
    with pytest.raises(queues.QueueUnavailable) as caught:
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    message = str(caught.value)
    assert "Sentinel master 'optima' via 127.0.0.1:1" in message
    assert "REDIS_SENTINELS, REDIS_SENTINEL_MASTER" in message
    assert "MasterNotFoundError" in message


def test_probe_clients_have_the_probe_timeouts_and_find_the_master_through_the_sentinels(settings):
    from redis.sentinel import SentinelConnectionPool

    from queues.connection.clients import probe_client

    direct = probe_client("queues", timeout=0.25)
    assert direct.ping() is True
    assert direct.connection_pool.connection_kwargs["socket_timeout"] == 0.25
    direct.close()
    settings.QUEUES_REDIS_SENTINELS, settings.QUEUES_REDIS_SENTINEL_MASTER = "127.0.0.1:1", "optima"
    via = probe_client("queues", timeout=0.25)
    assert isinstance(via.connection_pool, SentinelConnectionPool)
    assert via.connection_pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs["socket_timeout"] == 0.25
    assert probe_client("cache").connection_pool.__class__ is not SentinelConnectionPool  # the cache's own setting
