"""The limit keys page (issue 35 §2) stays within the panel's budget (issue 33): <= 5 Redis round trips,
whatever the number of keys."""

import pytest
from django.urls import reverse

import queues

pytestmark = pytest.mark.django_db(transaction=True)  # enqueues outside a transaction: written at once

JOB = "tests.jobs.sample.add"


def test_the_limit_keys_page_reads_forty_keys_in_at_most_5_round_trips(client, round_trips, queue_redis):
    for n in range(20):
        for _ in range(3):
            queues.enqueue("default", JOB, 1, 2, limit_key=f"seller:{n}", limit_rate="1/minute")
        queues.enqueue("default", JOB, 1, 2, limit_key=f"cabinet:{n}", limit_concurrency=1)
    response = round_trips.get(client, reverse("django_rq:queues_limits"))
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    html = response.content.decode()
    assert "seller:19" in html and "cabinet:19" in html
