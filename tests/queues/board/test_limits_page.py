"""The limit keys page (issue 35 §2) stays within the panel's budget (issue 33): <= 5 Redis round trips,
whatever the number of keys."""

import pytest
from django.urls import reverse

import queues
from queues.producer import rates

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


def test_a_key_without_a_rate_can_be_paused_from_the_page_and_its_held_jobs_wait(operator, queue_redis):
    jobs = [queues.enqueue("default", JOB, i, 0, limit_key="cabinet:1", limit_concurrency=1) for i in range(2)]
    url = reverse("django_rq:queues_limits")
    assert 'value="Pause cabinet:1"' in operator.get(url).content.decode()
    response = operator.post(url, {"key": "default:cabinet:1", "action": "pause_key"}, follow=True)
    html = response.content.decode()
    assert 'value="Resume cabinet:1"' in html
    assert queue_redis.zrange(rates.held_key("default:cabinet:1"), 0, -1) == [jobs[1].id.encode()]
