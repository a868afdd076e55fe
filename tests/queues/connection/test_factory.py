"""The one Redis client factory (queues/connection/factory.py): every client the app builds has the
timeouts and retry policy its caller asked for, and never shows its password."""

import socket

import pytest
import redis
from django.conf import settings
from redis.sentinel import SentinelConnectionPool

from queues.connection import failover
from queues.connection.factory import ReconnectOnce, copy_client, make_client, restrict

PASSWORD = "".join(["s3cr3t", "-factory"])  # built at run time: no test source line shows it whole


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port():
    """A TCP port that accepts connections and never answers (a hung Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(50)
    yield server.getsockname()[1]
    server.close()


def kwargs_of(client):
    return client.connection_pool.connection_kwargs


def test_a_client_has_the_timeouts_and_retry_it_was_given_and_a_repr_without_its_password():
    retry = ReconnectOnce()
    client = make_client(
        f"redis://app:{PASSWORD}@127.0.0.1:6379/2",
        timeout=0.25,
        connect_timeout=0.75,
        health_check_interval=7,
        retry=retry,
    )
    kwargs = kwargs_of(client)
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"], kwargs["health_check_interval"]) == (
        0.25,
        0.75,
        7,
    )
    assert kwargs["retry"] is retry
    assert (kwargs["username"], kwargs["password"], kwargs["db"]) == ("app", PASSWORD, 2)
    assert repr(client) == "<_MaskedRedis redis://app:***@127.0.0.1:6379/2>"


def test_the_connect_timeout_defaults_to_the_round_trip_timeout_and_idle_connections_are_not_pinged():
    kwargs = kwargs_of(make_client("redis://127.0.0.1:6379/0", timeout=0.4))
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"], kwargs["health_check_interval"]) == (
        0.4,
        0.4,
        0,
    )


def test_a_client_through_sentinel_gives_the_sentinels_its_timeouts_and_shows_the_master_not_the_password():
    sentinel = failover.SentinelConfig((("127.0.0.1", closed_port()),), "optima")
    client = make_client(f"redis://app:{PASSWORD}@10.0.0.9:6379/3", timeout=0.3, sentinel=sentinel)
    assert isinstance(client.connection_pool, SentinelConnectionPool)
    assert repr(client) == "<_MaskedRedis redis://app:***@10.0.0.9:6379/3 via Sentinel master 'optima'>"
    sentinel_kwargs = client.connection_pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs
    assert (sentinel_kwargs["socket_timeout"], sentinel_kwargs["socket_connect_timeout"]) == (0.3, 0.3)
    assert (kwargs_of(client)["username"], kwargs_of(client)["password"], kwargs_of(client)["db"]) == (
        "app",
        PASSWORD,
        3,
    )


def test_a_refused_connection_raises_an_error_that_names_the_host_and_not_the_password():
    client = make_client(f"redis://app:{PASSWORD}@127.0.0.1:{closed_port()}/0", timeout=0.5, retry=ReconnectOnce())
    with pytest.raises(redis.ConnectionError) as caught:
        client.ping()
    assert "127.0.0.1" in str(caught.value)
    assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value)


def test_a_redis_that_never_answers_raises_a_timeout_error_without_the_password(silent_port):
    client = make_client(f"redis://:{PASSWORD}@127.0.0.1:{silent_port}/0", timeout=0.2, retry=ReconnectOnce())
    with pytest.raises(redis.TimeoutError) as caught:
        client.ping()
    assert PASSWORD not in str(caught.value)


def test_reconnect_once_retries_a_dropped_connection_once_and_a_timeout_never():
    def failing(error):
        calls = []

        def do():
            calls.append(1)
            raise error

        with pytest.raises(type(error)):
            ReconnectOnce().call_with_retry(do, lambda exc: None)
        return len(calls)

    assert failing(redis.ConnectionError("dropped")) == 2
    assert failing(redis.TimeoutError("no answer")) == 1


def test_a_copy_reaches_the_same_server_through_a_pool_of_its_own_with_its_own_timeouts():
    source = make_client(settings.QUEUES_REDIS_URL, timeout=2.0, connect_timeout=1.0, health_check_interval=15)
    copy = copy_client(source, timeout=0.5)
    assert copy.connection_pool is not source.connection_pool
    assert (kwargs_of(copy)["socket_timeout"], kwargs_of(copy)["socket_connect_timeout"]) == (0.5, 0.5)
    assert kwargs_of(copy)["health_check_interval"] == 15  # kept when not given
    assert kwargs_of(source)["socket_timeout"] == 2.0  # the source is untouched
    assert repr(copy) == repr(source) and "***" in repr(copy)
    assert copy.ping() is True
    copy.close()
    source.close()


def test_a_copy_takes_the_retry_and_health_check_it_is_given():
    retry = ReconnectOnce()
    copy = copy_client(
        make_client(settings.QUEUES_REDIS_URL, timeout=2.0, health_check_interval=15),
        timeout=0.5,
        retry=retry,
        health_check_interval=0,
    )
    assert kwargs_of(copy)["retry"] is retry
    assert kwargs_of(copy)["health_check_interval"] == 0


def test_restrict_bounds_a_client_built_elsewhere_in_place():
    client = redis.Redis.from_url(settings.QUEUES_REDIS_URL, socket_timeout=5, health_check_interval=30)
    retry = ReconnectOnce()
    assert restrict(client, timeout=0.5, retry=retry) is client
    assert (
        kwargs_of(client)["socket_timeout"],
        kwargs_of(client)["socket_connect_timeout"],
        kwargs_of(client)["health_check_interval"],
    ) == (0.5, 0.5, 0)
    assert client.get_retry() is retry
    assert client.ping() is True
    client.close()


# --- the app's clients, each built by the factory with its own policy ---------------------------


def test_every_client_the_app_builds_hides_the_password_of_the_queues_url():
    from queues.connection.clients import get_cache_connection, get_connection, probe_client
    from queues.metrics import store

    password = redis.connection.parse_url(settings.QUEUES_REDIS_URL)["password"]
    clients = [get_connection(), get_cache_connection(), probe_client("queues"), store.scrape_client()]
    for client in clients:
        assert password not in repr(client)
        assert "***" in repr(client)


def test_the_queues_client_has_the_apps_timeouts_and_a_scrape_client_reconnects_once():
    from queues import conf
    from queues.connection import clients
    from queues.connection.clients import get_connection
    from queues.metrics import store

    # A fresh client: rq's Worker raises the socket timeout of the connection it is given, in place
    # (Worker._set_connection), and in-process worker tests earlier in the session share this one.
    clients.reset()
    opts = conf.options()
    kwargs = kwargs_of(get_connection())
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"], kwargs["health_check_interval"]) == (
        opts["SOCKET_TIMEOUT"],
        opts["SOCKET_CONNECT_TIMEOUT"],
        opts["HEALTH_CHECK_INTERVAL"],
    )
    scrape = kwargs_of(store.scrape_client())
    assert (scrape["socket_timeout"], scrape["socket_connect_timeout"], scrape["health_check_interval"]) == (
        opts["METRICS_REDIS_TIMEOUT"],
        opts["METRICS_REDIS_TIMEOUT"],
        0,
    )
    assert isinstance(scrape["retry"], ReconnectOnce)


def test_the_sign_in_throttle_uses_a_bounded_copy_of_the_cache_client():
    from queues.board import throttle
    from queues.connection.clients import get_cache_connection

    storage = throttle._storage(settings.QUEUES_REDIS_URL, throttle.REDIS_TIMEOUT)
    pool_kwargs = storage.storage.connection_pool.connection_kwargs
    assert (pool_kwargs["socket_timeout"], pool_kwargs["socket_connect_timeout"]) == (0.5, 0.5)
    assert isinstance(pool_kwargs["retry"], ReconnectOnce) and pool_kwargs["health_check_interval"] == 0
    assert storage.storage.connection_pool is not get_cache_connection().connection_pool


def test_a_workers_lifeline_beats_on_a_copy_of_the_workers_connection_with_short_timeouts():
    import types

    from queues.connection.clients import get_connection
    from queues.worker.liveness import Lifeline

    worker_connection = get_connection()
    lifeline = Lifeline("w1", worker_connection, types.SimpleNamespace(liveness_ttl=3), lambda: [])
    assert lifeline.connection.connection_pool is not worker_connection.connection_pool
    kwargs = kwargs_of(lifeline.connection)
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (1.0, 1.0)
    assert lifeline.connection.ping() is True
    lifeline.connection.close()
