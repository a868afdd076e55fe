"""The marketplace client against the fake marketplace over HTTP, and the shared rate limiter on
the session's real Redis."""

import datetime as dt
import socket
import uuid

import pytest

import queues
from features.marketplace.client import (
    MarketplaceClient,
    MarketplaceRejected,
    MarketplaceUnavailable,
    Throttled,
    retry_after_seconds,
)
from features.marketplace.ratelimit import CabinetRateLimiter, RateLimited, key_prefix
from tests.session_env import PREFIX


def client_for(marketplace, **kwargs):
    kwargs.setdefault("limiter", CabinetRateLimiter("1000/second"))
    return MarketplaceClient(marketplace.url, **kwargs)


def test_orders_of_a_cabinet_are_fetched_page_after_page(marketplace):
    marketplace.set_orders(7, 5)
    with client_for(marketplace) as client:
        orders = client.orders(7, page_size=2)
    assert [o["id"] for o in orders] == ["C7-00001", "C7-00002", "C7-00003", "C7-00004", "C7-00005"]
    assert marketplace.statuses("/api/v1/cabinets/7/") == [200, 200, 200]


def test_429_becomes_retry_after_with_the_servers_delay(marketplace):
    marketplace.fault("/api/v1/cabinets/7/", {"status": 429, "retry_after": 7})
    with client_for(marketplace) as client, pytest.raises(Throttled) as caught:
        client.orders(7)
    assert isinstance(caught.value, queues.RetryAfter)
    assert caught.value.seconds == 7.0
    assert not isinstance(caught.value, queues.PermanentError)


def test_5xx_is_retryable_not_permanent(marketplace):
    marketplace.fault("/api/v1/cabinets/7/", {"status": 503})
    with client_for(marketplace) as client, pytest.raises(MarketplaceUnavailable) as caught:
        client.orders(7)
    assert not isinstance(caught.value, (queues.PermanentError, queues.RetryAfter))
    assert "answered 503" in str(caught.value)


def test_4xx_other_than_429_is_a_permanent_error(marketplace):
    marketplace.fault("/api/v1/cabinets/7/", {"status": 404})
    with client_for(marketplace) as client, pytest.raises(MarketplaceRejected) as caught:
        client.orders(7)
    assert isinstance(caught.value, queues.PermanentError)
    assert caught.value.status == 404


def test_an_answer_that_never_comes_times_out_as_a_retryable_error(marketplace):
    marketplace.fault("/api/v1/cabinets/7/", {"hang": True})
    with client_for(marketplace, read_timeout=0.5) as client, pytest.raises(MarketplaceUnavailable) as caught:
        client.orders(7)
    assert "timed out" in str(caught.value)
    assert "read 0.5s" in str(caught.value)


def test_a_slow_answer_within_the_read_timeout_succeeds(marketplace):
    marketplace.fault("/api/v1/cabinets/7/", {"delay": 0.3})
    with client_for(marketplace, read_timeout=5) as client:
        assert len(client.orders(7)) == 5


def test_a_refused_connection_is_retryable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again at once: nothing listens there
    client = MarketplaceClient(f"http://127.0.0.1:{port}", limiter=CabinetRateLimiter("1000/second"))
    with client, pytest.raises(MarketplaceUnavailable) as caught:
        client.orders(1)
    assert "ConnectError" in str(caught.value)


def test_the_token_never_appears_in_errors_or_repr(marketplace):
    marketplace.fault("/api/v1/cabinets/7/", {"status": 500}, {"status": 404})
    with client_for(marketplace, token="s3cret-token") as client:
        messages = [repr(client)]
        for _ in range(2):
            with pytest.raises(Exception) as caught:
                client.orders(7)
            messages.append(str(caught.value))
    assert all("s3cret-token" not in m for m in messages)


def test_price_changes_carry_the_idempotency_key(marketplace):
    with client_for(marketplace) as client:
        first = client.set_price(3, "10.50", idempotency_key="k-1")
        second = client.set_price(3, "10.50", idempotency_key="k-1")
    assert first == {"product_id": 3, "price": "10.50", "duplicate": False}
    assert second == {"product_id": 3, "price": "10.50", "duplicate": True}


@pytest.mark.parametrize(
    "header, expected",
    [
        ("5", 5.0),
        ("0", 0.0),
        ("-3", 0.0),
        ("2.5", 2.5),
        (None, 1.0),
        ("soon", 1.0),
        ("999999", 3600.0),
        ("Wed, 01 Jul 2026 12:00:30 GMT", 30.0),
        ("Wed, 01 Jul 2026 11:00:00 GMT", 0.0),
    ],
)
def test_retry_after_header_values_are_read_as_seconds(header, expected):
    now = dt.datetime(2026, 7, 1, 12, 0, 0, tzinfo=dt.UTC)
    assert retry_after_seconds(header, default=1.0, maximum=3600.0, now=now) == expected


def test_two_workers_limiters_share_one_window_per_cabinet():
    worker_a = CabinetRateLimiter("3/minute", max_wait=0)
    worker_b = CabinetRateLimiter("3/minute", max_wait=0)
    worker_a.acquire("cabinet-1")
    worker_b.acquire("cabinet-1")
    worker_a.acquire("cabinet-1")
    with pytest.raises(RateLimited) as caught:
        worker_b.acquire("cabinet-1")
    assert isinstance(caught.value, queues.RetryAfter)
    assert 1 <= caught.value.seconds <= 60
    worker_b.acquire("cabinet-2")  # another cabinet has its own window


def test_rate_limiter_keys_live_under_the_prefix_on_the_cache_connection(admin_redis):
    from queues.connection.clients import get_cache_connection, get_connection

    limiter = CabinetRateLimiter("5/second")
    cabinet = f"cabinet-{uuid.uuid4().hex[:8]}"  # no other test's key (the Redis is shared) holds this name
    limiter.acquire(cabinet)
    assert limiter.storage.storage.connection_pool is get_cache_connection().connection_pool
    assert limiter.storage.storage.connection_pool is not get_connection().connection_pool
    keys = sorted(k.decode() for k in admin_redis.scan_iter(match=f"*{cabinet}*"))  # under any prefix, or none
    assert keys == [f"{PREFIX}:features:ratelimit:LIMITER/{cabinet}/5/1/second"]
    assert key_prefix() == f"{PREFIX}:features:ratelimit"


def test_a_short_wait_for_a_slot_is_waited_out_in_the_job():
    limiter = CabinetRateLimiter("1/second", max_wait=5)
    limiter.acquire("cabinet-3")
    limiter.acquire("cabinet-3")  # waits for the window instead of raising
    assert limiter.try_acquire("cabinet-3") > 0
