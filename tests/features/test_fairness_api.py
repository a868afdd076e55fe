"""Fairness through the API (issue 12, item 4): every job a view enqueues is under its owner's limit
key, so one seller's flood waits behind their own jobs; ``/jobs/<id>/`` says a job is held."""

import pytest

import queues
from features import conf
from queues.catalog.lookup import get_queue
from queues.producer import rates

pytestmark = pytest.mark.django_db(transaction=True)


def sync(client, cabinet_id):
    response = client.post("/features/orders/sync/", {"cabinet_id": cabinet_id}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


@pytest.fixture
def seller_a(api):
    return api.own(cabinets=[5, 7, 8, 9])


@pytest.fixture
def seller_b(make_api):
    return make_api("seller-b").own(cabinets=[6])


def test_a_job_enqueued_through_the_api_is_under_its_owners_limit_key(seller_a):
    job = queues.fetch_job(sync(seller_a, 5))
    assert job.rate_limit_key == f"orders-sync:owner:{seller_a.user.pk}"
    assert job.rate_limit_concurrency == 2  # features/orders/queues.py


def test_one_owners_flood_is_held_while_another_owners_job_is_queued(seller_a, seller_b):
    a_jobs = [sync(seller_a, cabinet) for cabinet in (5, 7, 8, 9)]
    b_job = sync(seller_b, 6)
    assert get_queue("orders-sync").job_ids == [*a_jobs[:2], b_job]
    third = seller_a.get(f"/jobs/{a_jobs[2]}/").json()
    assert third["state"] == "held"
    next_release = third["held_by"].pop("next_release")  # the orders' rate: its next token, a moment away
    assert next_release is None or 0 <= next_release <= 1
    assert third["held_by"] == {
        "key": f"owner:{seller_a.user.pk}",
        "concurrency": 2,
        "in_use": 2,
        "held": 2,
        "ahead": 0,
        "rate": str(rates.parse(conf.get("MARKETPLACE_RATE_LIMIT"))),  # "5/second" shown as "5/s"
        "paused": False,
    }
    assert seller_a.get(f"/jobs/{a_jobs[3]}/").json()["held_by"]["ahead"] == 1
    first = seller_a.get(f"/jobs/{a_jobs[0]}/").json()
    assert (first["state"], first["held_by"]["ahead"]) == ("queued", None)
    other = seller_b.get(f"/jobs/{b_job}/").json()
    assert other["state"] == "queued"
    assert other["held_by"]["key"] == f"owner:{seller_b.user.pk}"


def test_an_owner_can_cancel_a_held_job(seller_a):
    job_ids = [sync(seller_a, cabinet) for cabinet in (5, 7, 8)]
    response = seller_a.delete(f"/jobs/{job_ids[2]}/")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "canceled"
    assert response.json()["held_by"] is None


def test_a_job_without_a_limit_key_has_no_held_by(seller_a):
    job = queues.enqueue_call("default", "tests.jobs.lifecycle.quick", [1], meta={"owner": seller_a.user.pk})
    body = seller_a.get(f"/jobs/{job.id}/").json()
    assert (body["state"], body["held_by"]) == ("queued", None)


def test_a_job_held_by_its_rate_alone_says_so_through_the_api(seller_a):
    """A job held by a rate and no concurrency (queues/producer/rates.py): ``held_by`` names the rate and when the
    next job of the key is released; concurrency and in_use are null."""
    owner = {"owner": seller_a.user.pk}
    first, second = (
        queues.enqueue_call(
            "default", "tests.jobs.lifecycle.quick", [n], meta=owner, limit_key="feed", limit_rate="1/h"
        )
        for n in (1, 2)
    )
    assert seller_a.get(f"/jobs/{first.id}/").json()["state"] == "queued"  # the key's first token
    body = seller_a.get(f"/jobs/{second.id}/").json()
    assert body["state"] == "held"
    held_by = body["held_by"]
    assert {k: held_by[k] for k in ("key", "concurrency", "in_use", "held", "ahead", "rate", "paused")} == {
        "key": "feed",
        "concurrency": None,
        "in_use": None,
        "held": 1,
        "ahead": 0,
        "rate": "1/h",
        "paused": False,
    }
    assert 0 < held_by["next_release"] <= 3600
