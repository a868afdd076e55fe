"""Issue 19, second trust pass: a Redis password given as ``?password=`` is masked everywhere and
honoured by every client; panel redirects stay on this site; a ``unique=`` key holding an id rq
rejects never breaks an enqueue.

The suite talks to Redis as an ACL user (tests/session_env.py); here that user's password moves
from the URL's authority into its query, and every client must still authenticate as that user
(``ACL WHOAMI``), never as the server's default user.
"""

import logging
import os
import sys
from urllib.parse import urlsplit

import pytest
from django.http import HttpResponseRedirect
from django.test import Client, RequestFactory, override_settings
from django.views.debug import ExceptionReporter

import queues
from queues.connection.factory import mask_url
from queues.connection.masking import mask_urls_in
from queues.keyspace import keys
from tests.jobs import sample
from tests.session_env import ACL_USER
from tests.support import closed_port
from tests.support.panel import dead_job

_SUITE = urlsplit(os.environ["REDIS_URL"])  # the ACL user's URL
SECRET = _SUITE.password
TOKEN = "probe-token-" + "y" * 32


def _url(query, user="", port=None):
    """The suite's Redis URL with the credentials moved: ``user`` in the authority (if any), ``query``."""
    host = f"{_SUITE.hostname}:{port or _SUITE.port}"
    authority = f"{user}@{host}" if user else host
    extra = f"&{_SUITE.query}" if _SUITE.query else ""
    return f"{_SUITE.scheme}://{authority}{_SUITE.path}?{query}{extra}"


# The two spellings redis-py accepts: the user in the authority and the password in the query, or both in it.
QUERY_URLS = {
    "password in the query": lambda port=None: _url(f"password={SECRET}", user=ACL_USER, port=port),
    "username and password in the query": lambda port=None: _url(f"username={ACL_USER}&password={SECRET}", port=port),
}


@pytest.mark.parametrize(
    "url, masked",
    [
        ("redis://host:6379/0?password=s3cr3t", "redis://host:6379/0?password=***"),
        ("redis://host:6379/0?username=app&password=s3cr3t", "redis://host:6379/0?username=app&password=***"),
        (
            "rediss://app:s3cr3t@host:6380/2?ssl_cert_reqs=none&password=other",
            "rediss://app:***@host:6380/2?ssl_cert_reqs=none&password=***",
        ),
        ("rediss://host/0?ssl_password=k3y&db=1", "rediss://host/0?ssl_password=***&db=1"),
        ("redis://host:6379/0?Password=s3cr3t", "redis://host:6379/0?Password=***"),
    ],
)
def test_mask_url_hides_a_password_given_in_the_query(url, masked):
    assert mask_url(url) == masked


def test_mask_urls_in_a_text_hides_query_passwords_too():
    text = "could not reach redis://host:1/0?db=1&password=s3cr3t nor rediss://u:pw2@h:2/0?password=s3cr3t2#x"
    masked = mask_urls_in(text)
    assert "s3cr3t" not in masked and "pw2" not in masked
    assert masked == "could not reach redis://host:1/0?db=1&password=*** nor rediss://u:***@h:2/0?password=***#x"


def _whoami(client):
    who = client.acl_whoami()
    return who.decode() if isinstance(who, bytes) else who


@pytest.mark.parametrize("form", sorted(QUERY_URLS))
def test_every_client_the_app_builds_authenticates_with_a_password_given_in_the_query(form):
    import django_rq

    from queues.board import bounded
    from queues.connection.clients import get_cache_connection, get_connection, probe_client
    from queues.connection.factory import copy_client
    from queues.metrics.store import scrape_client

    url = QUERY_URLS[form]()
    with override_settings(QUEUES_REDIS_URL=url, CACHE_REDIS_URL=url):
        with bounded.request_scope():
            panel = bounded.connection()
            clients = {
                "queues": get_connection(),
                "cache": get_cache_connection(),
                "probe": probe_client("queues"),
                "cache probe": probe_client("cache"),
                "scrape": scrape_client(),
                "copy (throttle, lifeline)": copy_client(get_cache_connection(), timeout=1),
                "django-rq (workers, commands)": django_rq.get_connection("default"),
                "panel": panel,
            }
            who = {name: _whoami(client) for name, client in clients.items()}
    assert who == dict.fromkeys(clients, ACL_USER)
    for name, client in clients.items():
        assert SECRET not in repr(client), name


@pytest.mark.parametrize("form", sorted(QUERY_URLS))
def test_djangos_cache_authenticates_with_a_password_given_in_the_query(form, settings):
    from django.core.cache import caches

    settings.CACHES = {**settings.CACHES, "default": {**settings.CACHES["default"], "LOCATION": QUERY_URLS[form]()}}
    cache = caches["default"]
    assert _whoami(cache._cache.get_client(write=True)) == ACL_USER
    cache.set("query-password", "ok")  # under KEY_PREFIX, the prefix the ACL user may write
    assert cache.get("query-password") == "ok"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_process_runs_jobs_with_a_password_given_in_the_query_and_never_logs_it(start_worker):
    job = queues.enqueue("default", sample.add, 2, 3)
    worker = start_worker("default", "--burst", env={"REDIS_URL": QUERY_URLS["password in the query"]()})
    assert worker.wait(60) == 0, worker.output()
    job.refresh()
    assert (job.get_status(), job.return_value()) == ("finished", 5)
    assert SECRET not in worker.output()


@pytest.mark.parametrize("form", sorted(QUERY_URLS))
def test_sentinel_clients_and_django_rq_take_the_credentials_from_the_query(form):
    from django.conf import settings

    from queues.connection.clients import describe, get_connection
    from queues.connection.djangorq import django_rq_config

    url = QUERY_URLS[form]()
    with override_settings(
        QUEUES_REDIS_URL=url, QUEUES_REDIS_SENTINELS="127.0.0.1:1", QUEUES_REDIS_SENTINEL_MASTER="optima"
    ):
        client = get_connection()
        kwargs = client.connection_pool.connection_kwargs
        assert (kwargs["username"], kwargs["password"]) == (ACL_USER, SECRET)
        cfg = django_rq_config()
        assert (cfg["PASSWORD"], cfg["CONNECTION_KWARGS"]["username"]) == (SECRET, ACL_USER)
        shown = [repr(client), describe(), repr(settings.RQ_QUEUES)]
    assert all(SECRET not in text for text in shown), shown


@pytest.mark.django_db
@pytest.mark.parametrize("form", sorted(QUERY_URLS))
def test_the_panel_and_healthz_work_and_never_show_a_password_given_in_the_query(form, caplog):
    url = QUERY_URLS[form]()
    with (
        override_settings(QUEUES_REDIS_URL=url, CACHE_REDIS_URL=url, HEALTHZ_TOKEN=TOKEN),
        caplog.at_level(logging.DEBUG),
    ):
        job, _ = dead_job("default", row=False)
        client = Client()
        pages = {
            path: client.get(path)
            for path in (
                "/admin/queues/",
                "/admin/queues/queues/1/",
                f"/admin/queues/queues/1/{job.id}/",
                "/admin/queues/workers/1/",
                "/admin/queues/stats.json",
                "/admin/queues/find/",
            )
        }
        health = client.get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert {path: response.status_code for path, response in pages.items()} == dict.fromkeys(pages, 200)
    assert health.status_code == 200, health.content
    assert health.json()["components"]["queue_redis"]["url"] == mask_url(url)
    assert "password=***" in mask_url(url)
    for response in [*pages.values(), health]:
        assert SECRET not in response.content.decode()
    assert SECRET not in caplog.text


@pytest.mark.django_db
def test_a_redis_that_is_down_is_named_without_its_query_password_on_pages_errors_and_logs(caplog, rf):
    url = QUERY_URLS["username and password in the query"](port=closed_port())
    with (
        override_settings(QUEUES_REDIS_URL=url, CACHE_REDIS_URL=url, HEALTHZ_TOKEN=TOKEN, DEBUG=True),
        caplog.at_level(logging.DEBUG),
    ):
        panel = Client().get("/admin/queues/")
        health = Client().get("/healthz", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        with pytest.raises(queues.QueueUnavailable) as refused:  # unique: Redis is asked first
            queues.enqueue("default", sample.add, 1, 2, unique="k")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            error_page = ExceptionReporter(rf.get("/"), *sys.exc_info()).get_traceback_html()
    assert (panel.status_code, health.status_code) == (503, 503)
    assert "password=***" in panel.content.decode()
    shown = {
        "panel": panel.content.decode(),
        "healthz": health.content.decode(),
        "enqueue": str(refused.value),
        "error page": error_page,
        "logs": caplog.text,
    }
    assert [where for where, text in shown.items() if SECRET in text] == []


def test_the_eviction_check_names_the_redis_without_its_query_password():
    from queues.connection.info import policy_problems

    problems = policy_problems("allkeys-lru", mask_url("redis://h:1/0?password=s3cr3t"))
    assert len(problems) == 1
    assert "s3cr3t" not in problems[0].msg + problems[0].hint
    assert "password=***" in problems[0].msg


# --- redirects stay on this site ---------------------------------------------------------------

CONFIRM = "/admin/queues/queues/confirm-action/1/"
ACTIONS = "/admin/queues/queues/actions/1/"


@pytest.mark.django_db
@pytest.mark.parametrize("referer", ["https://evil.example/phish", "//evil.example/x", "javascript:alert(1)", "x"])
def test_confirm_action_with_a_foreign_referer_redirects_to_the_queue_page_instead(referer):
    response = Client().get(CONFIRM, HTTP_REFERER=referer)
    assert (response.status_code, response["Location"]) == (302, "/admin/queues/queues/1/")


@pytest.mark.django_db
@pytest.mark.parametrize("next_url", ["https://evil.example/phish", "//evil.example/x", "javascript:alert(1)"])
def test_an_empty_bulk_action_does_not_follow_a_foreign_next_url(next_url):
    response = Client().post(ACTIONS, {"action": "delete", "next_url": next_url})
    assert (response.status_code, response["Location"]) == (302, "/admin/queues/queues/1/")


@pytest.mark.django_db
def test_a_same_site_referer_is_still_followed():
    same_site = "http://testserver/admin/queues/queues/1/?page=2"
    assert Client().get(CONFIRM, HTTP_REFERER=same_site)["Location"] == same_site
    response = Client().post(ACTIONS, {"action": "delete", "next_url": "/admin/queues/queues/1/finished/"})
    assert response["Location"] == "/admin/queues/queues/1/finished/"


@pytest.mark.django_db
def test_any_guarded_view_redirecting_off_site_is_sent_to_the_panel_home_instead(caplog):
    from queues.board.access import guard

    def a_new_django_rq_view(request):
        return HttpResponseRedirect("https://evil.example/")

    with caplog.at_level(logging.WARNING, logger="queues.board"):
        response = guard(a_new_django_rq_view)(RequestFactory().get("/admin/queues/new/"))
    assert (response.status_code, response["Location"]) == (302, "/admin/queues/")
    assert "https://evil.example/" in caplog.text


# --- a unique key holding an id rq rejects ------------------------------------------------------


@pytest.mark.parametrize("held", [b"a.b/c", b"../../x", b"evil\nid", b"\xff\xfe", b"a:b"])
def test_a_unique_key_holding_an_id_rq_rejects_is_reported_once_and_replaced(queue_redis, caplog, held):
    lock = keys.unique_key("orders-sync", "cabinet-7")
    queue_redis.set(lock, held)
    with caplog.at_level(logging.INFO, logger="queues.enqueueing"):
        job = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-7")
        again = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-7")
    assert queue_redis.get(lock) == job.id.encode()
    assert again.id == job.id  # the new job holds the key now
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    message = errors[0].getMessage()
    assert lock in message and "\n" not in message
    assert "replaced" in message


def test_a_unique_key_whose_job_key_is_not_a_hash_is_treated_as_no_waiting_job(queue_redis, caplog):
    lock = keys.unique_key("orders-sync", "cabinet-8")
    queue_redis.set(lock, "planted-id")
    queue_redis.rpush(keys.job_key("planted-id"), "not", "a", "hash")
    with caplog.at_level(logging.INFO, logger="queues.enqueueing"):
        job = queues.enqueue("orders-sync", "tests.jobs.lifecycle.quick", 1, unique="cabinet-8")
    assert queue_redis.get(lock) == job.id.encode()
    assert [r.levelno for r in caplog.records].count(logging.ERROR) == 1
    assert queue_redis.type(keys.job_key("planted-id")) == b"list"  # kept for investigation
