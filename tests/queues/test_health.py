"""GET /healthz: each component's status; 503 naming the failing one; details only for staff or a probe token."""

import pytest
from django.test import override_settings

from tests.support import closed_port

TOKEN = "probe-token-" + "x" * 32
AS_PROBE = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
ACL_URL = "redis://acl-user:pw-s3cr3t@127.0.0.1:{port}/3"


@pytest.mark.django_db
def test_healthz_is_200_with_every_component_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {k: v["status"] for k, v in body["components"].items()} == {
        "database": "ok",
        "queue_redis": "ok",
        "cache_redis": "ok",
    }


@pytest.mark.django_db
def test_anonymous_healthz_shows_each_components_status_and_nothing_else(client):
    port = closed_port()
    with override_settings(QUEUES_REDIS_URL=ACL_URL.format(port=port), HEALTHZ_TOKEN=TOKEN):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "error",
        "failing": ["queue_redis"],
        "components": {
            "database": {"status": "ok"},
            "queue_redis": {"status": "error"},
            "cache_redis": {"status": "ok"},
        },
    }
    text = response.content.decode()
    for leak in ("acl-user", "127.0.0.1", str(port), "/3", "sqlite", "postgres", "ConnectionError"):
        assert leak not in text
    assert response.headers["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"
    assert response.headers["Vary"] == "Authorization, Cookie"


@pytest.mark.django_db
def test_a_probe_presenting_the_token_gets_the_details_with_the_password_masked(client):
    port = closed_port()
    with override_settings(QUEUES_REDIS_URL=ACL_URL.format(port=port), HEALTHZ_TOKEN=TOKEN):
        response = client.get("/healthz", **AS_PROBE)
    assert response.status_code == 503
    body = response.json()
    assert body["components"]["queue_redis"] == {
        "status": "error",
        "url": f"redis://acl-user:***@127.0.0.1:{port}/3",
        "error": "ConnectionError",
    }
    assert body["components"]["database"]["vendor"] in ("sqlite", "postgresql")
    assert isinstance(body["seconds"], float)
    assert "pw-s3cr3t" not in response.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("authorization", [f"Bearer {TOKEN}x", f"Token {TOKEN}", TOKEN, "Bearer ", ""])
def test_a_wrong_or_malformed_token_gets_the_status_only(client, authorization):
    with override_settings(HEALTHZ_TOKEN=TOKEN):
        response = client.get("/healthz", HTTP_AUTHORIZATION=authorization)
    assert response.status_code == 200
    assert response.json()["components"]["queue_redis"] == {"status": "ok"}


@pytest.mark.django_db
def test_no_token_configured_means_no_bearer_gets_details(client):
    with override_settings(HEALTHZ_TOKEN=""):
        response = client.get("/healthz", HTTP_AUTHORIZATION="Bearer ")
    assert response.json()["components"]["database"] == {"status": "ok"}


@pytest.mark.django_db
def test_a_staff_user_gets_the_details_and_a_plain_user_does_not(client, django_user_model):
    plain = django_user_model.objects.create_user("plain", password="pw-plain-123456")
    staff = django_user_model.objects.create_user("staff", password="pw-staff-123456", is_staff=True)
    client.force_login(plain)
    assert client.get("/healthz").json()["components"]["database"] == {"status": "ok"}
    client.force_login(staff)
    assert client.get("/healthz").json()["components"]["database"]["vendor"] in ("sqlite", "postgresql")


@pytest.mark.django_db
def test_healthz_is_503_naming_the_queue_redis_when_it_refuses_connections(client):
    with override_settings(QUEUES_REDIS_URL=f"redis://:pw-s3cr3t@127.0.0.1:{closed_port()}/0", HEALTHZ_TOKEN=TOKEN):
        response = client.get("/healthz", **AS_PROBE)
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["queue_redis"]
    assert body["components"]["queue_redis"]["error"] == "ConnectionError"
    assert "pw-s3cr3t" not in response.content.decode()


@pytest.mark.django_db
def test_healthz_is_503_when_the_cache_redis_does_not_answer_at_all(client, silent_redis):
    with override_settings(CACHE_REDIS_URL=silent_redis, HEALTHZ_TOKEN=TOKEN):
        response = client.get("/healthz", **AS_PROBE)
    assert response.status_code == 503
    assert response.json()["failing"] == ["cache_redis"]
    assert response.json()["components"]["cache_redis"]["error"] == "TimeoutError"


@pytest.mark.django_db
def test_every_queue_server_is_a_component_and_a_server_down_is_named(client, second_redis, settings):
    """Issue 36: each server of QUEUES_REDIS_SERVERS is ``queue_redis:<name>``; the one that is down is named, the
    answer "degraded" and 200 (the default server down is a 503, above)."""
    settings.HEALTHZ_TOKEN = TOKEN
    body = client.get("/healthz", **AS_PROBE).json()
    assert {k: v["status"] for k, v in body["components"].items()} == {
        "database": "ok",
        "queue_redis": "ok",
        "queue_redis:b": "ok",
        "cache_redis": "ok",
    }
    assert body["components"]["queue_redis:b"]["url"] == second_redis.url
    second_redis.stop()
    response = client.get("/healthz", **AS_PROBE)
    assert response.status_code == 200  # it stops only its own queues: the web process stays in service
    assert response.json()["status"] == "degraded"
    assert response.json()["failing"] == ["queue_redis:b"]
    assert response.json()["components"]["queue_redis:b"]["error"] == "ConnectionError"
    assert response.json()["components"]["queue_redis"]["status"] == "ok"
