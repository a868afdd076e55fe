"""One answer per idempotency key, at any moment; a planted unique key never breaks an endpoint.

The repricer's key is bound to the first product and price it was asked with: the same key with
other arguments answers 409 naming the key whether the first change is queued, running or done;
with the same arguments the answer is today's (the waiting job, or a new job that finds it applied).
"""

import logging

import pytest

import queues
from features.repricer.models import PriceChange, Product
from queues.keyspace import keys
from tests.support.features import job_status, wait_job

pytestmark = pytest.mark.django_db(transaction=True)


def reprice(api, product_id, price, key):
    api.own(products=[product_id])
    return api.post(
        "/features/repricer/", {"product_id": product_id, "price": price, "idempotency_key": key}, format="json"
    )


def assert_conflict(response, key):
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["idempotency_key"] == key
    assert repr(key) in body["detail"] and "the arguments differ" in body["detail"]


def test_a_reused_key_with_other_arguments_is_409_while_the_first_job_waits(api):
    first = reprice(api, 41, "19.90", "k-41")
    assert first.status_code == 202
    assert_conflict(reprice(api, 41, "29.90", "k-41"), "k-41")
    api.own(products=[42])
    assert_conflict(reprice(api, 42, "19.90", "k-41"), "k-41")
    again = reprice(api, 41, "19.90", "k-41")  # the same change: the waiting job, as before
    assert (again.status_code, again.json()["job_id"]) == (202, first.json()["job_id"])
    repricer = queues.get_queue("repricer")
    assert (repricer.count, repricer.scheduled_job_registry.count) == (0, 1)  # debounced: waits for its window
    assert job_status(api, first.json()["job_id"])["state"] == "scheduled"
    change = PriceChange.objects.get()
    assert (change.product_id, str(change.price), change.job_id) == (41, "19.90", first.json()["job_id"])


@pytest.mark.slow
def test_a_reused_key_with_other_arguments_is_409_while_the_first_job_runs_and_after_it_finished(
    api, marketplace, feature_worker, settings
):
    settings.REPRICER_DEBOUNCE_SECONDS = 1  # the product's edits are debounced (features/repricer/views.py)
    marketplace.fault("/api/v1/products/43/", {"delay": 3})
    first = reprice(api, 43, "10.00", "k-43").json()["job_id"]
    worker = feature_worker("repricer")
    wait_job(api, first, states=("started",), worker=worker)
    assert_conflict(reprice(api, 43, "99.00", "k-43"), "k-43")
    assert wait_job(api, first, worker=worker)["state"] == "finished"
    assert_conflict(reprice(api, 43, "99.00", "k-43"), "k-43")
    same = reprice(api, 43, "10.00", "k-43")
    assert same.status_code == 202
    assert wait_job(api, same.json()["job_id"], worker=worker)["result"]["reason"] == "already applied"
    assert str(Product.objects.get(product_id=43).price) == "10.00"
    assert marketplace.statuses("/api/v1/products/43/") == [200]


def test_a_job_enqueued_outside_the_api_with_a_used_key_fails_for_good_with_the_same_message(api):
    from features.repricer.jobs import apply_price

    PriceChange.objects.create(owner=api.user, idempotency_key="k-44", product_id=44, price="10.00")
    with pytest.raises(
        queues.PermanentError,
        match=r"'k-44' was already used for product 44 at 10.00; .*"
        r"the arguments differ",
    ):
        apply_price(44, "11.00", "k-44", api.user.pk)


def test_a_refused_enqueue_claims_no_key(api, settings):
    settings.QUEUES_REDIS_URL = "redis://127.0.0.1:1/0"  # unique=: Redis is asked first, and is down
    assert reprice(api, 45, "10.00", "k-45").status_code == 503
    assert PriceChange.objects.count() == 0


@pytest.mark.parametrize("held", [b"a.b/c", b"../../x", b"\xff"])
def test_orders_sync_with_a_unique_key_holding_an_id_rq_rejects_is_202_and_replaces_it(api, queue_redis, caplog, held):
    api.own(cabinets=[12])
    lock = keys.unique_key("orders-sync", f"owner-{api.user.pk}.cabinet-12")
    queue_redis.set(lock, held)
    with caplog.at_level(logging.ERROR, logger="queues.enqueueing"):
        response = api.post("/features/orders/sync/", {"cabinet_id": 12}, format="json")
    assert response.status_code == 202, response.content
    assert queue_redis.get(lock) == response.json()["job_id"].encode()
    assert len([r for r in caplog.records if lock in r.getMessage()]) == 1
