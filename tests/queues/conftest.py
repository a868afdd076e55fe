"""Fixtures of the tests of ``queues/``: private Redis servers (an outage, a silent one) and a panel operator."""

import shutil
import socket

import pytest
import redis
from django.test import Client

from devtools.redis_server import RedisServer
from tests.support.outages import DurableRedisServer


@pytest.fixture
def outage_redis(settings):
    """(server, client): a private Redis for one test; this process enqueues to it too."""
    servers = []

    def make(durable):
        server = (DurableRedisServer if durable else RedisServer)().start()
        servers.append(server)
        settings.QUEUES_REDIS_URL = server.url
        return server, redis.Redis.from_url(server.url)

    yield make
    for server in servers:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture
def silent_redis():
    """A TCP port that accepts connections and never answers (a hung Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(50)
    yield f"redis://:s3cr3t-pw@127.0.0.1:{server.getsockname()[1]}/0"
    server.close()


@pytest.fixture
def operator(django_user_model, settings):
    """A client signed in as a superuser, prod rules (the panel's pages answer it, errors as responses)."""
    settings.OPTIMA_ENV = "prod"
    user = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client
