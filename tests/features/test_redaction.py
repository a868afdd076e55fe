"""A job's error as a client sees it: the class name and a message with no internal URL or secret."""

import pytest
from django.test import override_settings

from features.redaction import public_error

TRACEBACK = """Traceback (most recent call last):
  File "/srv/optima/features/orders/jobs.py", line 23, in sync_cabinet
    payload = client.orders(cabinet_id)
{last}
"""


@pytest.mark.parametrize(
    "last, expected",
    [
        (
            "features.marketplace.client.MarketplaceRejected: GET http://10.0.3.7:8765/api/v1/cabinets/24/orders "
            'answered 404: {"error": "cabinet 24 is not connected"}',
            'MarketplaceRejected: GET <url> answered 404: {"error": "cabinet 24 is not connected"}',
        ),
        (
            "features.marketplace.client.Throttled: GET https://mp.internal.example/api/v1/cabinets/2/orders "
            "answered 429; Retry-After '5'",
            "Throttled: GET <url> answered 429; Retry-After '5'",
        ),
        (
            "redis.exceptions.ConnectionError: Error 111 connecting to redis.internal:6379. Connection refused.",
            "ConnectionError: Error 111 connecting to <address>. Connection refused.",
        ),
        (
            "redis.exceptions.AuthenticationError: invalid password for redis://optima:s3cretpw@10.0.0.5:6379/0",
            "AuthenticationError: invalid password for <url>",
        ),
        (
            "psycopg.OperationalError: connection failed: password=hunter2 host=10.1.2.3 port=5432",
            "OperationalError: connection failed: password=<secret> host=<address> port=5432",
        ),
        (
            "httpx.HTTPStatusError: sent Authorization: Bearer abcdefghijklmnop to [::1]:8765",
            "HTTPStatusError: sent Authorization: <secret> to <address>",
        ),
        (
            "queues.exceptions.PermanentError: idempotency_key 'k-33' was already used for product 33 at 10.00; "
            "this job asks product 33 at 99.00. Use a new key for a new change.",
            "PermanentError: idempotency_key 'k-33' was already used for product 33 at 10.00; "
            "this job asks product 33 at 99.00. Use a new key for a new change.",
        ),
        (
            "rq.timeouts.JobTimeoutException: Task exceeded maximum timeout value (1 seconds)",
            "JobTimeoutException: Task exceeded maximum timeout value (1 seconds)",
        ),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
    ],
)
def test_the_error_keeps_the_class_name_and_masks_urls_addresses_and_secrets(last, expected):
    assert public_error(TRACEBACK.format(last=last)) == expected


def test_no_error_is_none():
    assert public_error(None) is None
    assert public_error("  \n ") is None


@override_settings(MARKETPLACE_TOKEN="tok-XYZ-123")
def test_the_marketplace_token_is_masked_wherever_it_appears():
    assert public_error("ValueError: bad header tok-XYZ-123 sent") == "ValueError: bad header <secret> sent"


def test_a_long_error_is_shortened():
    text = public_error("ValueError: " + "x" * 5000)
    assert len(text) == 503
    assert text.endswith("...")
