"""GET /healthz: each component's status; 503 naming the failing one."""
import socket

import pytest
from django.test import override_settings

from tests.queues.test_connection import closed_port, silent_redis  # noqa: F401  (fixture)


@pytest.mark.django_db
def test_healthz_is_200_with_every_component_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert {k: v["status"] for k, v in body["components"].items()} == {
        "database": "ok", "queue_redis": "ok", "cache_redis": "ok",
    }


@pytest.mark.django_db
def test_healthz_is_503_naming_the_queue_redis_when_it_refuses_connections(client):
    with override_settings(QUEUES_REDIS_URL=f"redis://:pw-s3cr3t@127.0.0.1:{closed_port()}/0"):
        response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["failing"] == ["queue_redis"]
    assert body["components"]["queue_redis"]["error"] == "ConnectionError"
    assert "pw-s3cr3t" not in response.content.decode()


@pytest.mark.django_db
def test_healthz_is_503_when_the_cache_redis_does_not_answer_at_all(client, silent_redis):  # noqa: F811
    with override_settings(CACHE_REDIS_URL=silent_redis):
        response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["failing"] == ["cache_redis"]
    assert response.json()["components"]["cache_redis"]["error"] == "TimeoutError"
