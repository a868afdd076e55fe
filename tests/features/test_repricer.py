"""Repricer end to end: attempts=1 and an idempotency key, through the view and a real worker."""

import pytest

import queues
from features.repricer.models import PriceChange, Product
from tests.support import wait_for
from tests.support.features import dead_letter, wait_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _short_debounce(settings):
    """A product's edits are debounced (features/repricer/views.py): a short window keeps these tests quick."""
    settings.REPRICER_DEBOUNCE_SECONDS = 1


def reprice(api, product_id, price, key):
    api.own(products=[product_id])
    response = api.post(
        "/features/repricer/", {"product_id": product_id, "price": price, "idempotency_key": key}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


def test_a_price_is_applied_once_per_idempotency_key(api, marketplace, feature_worker):
    worker = feature_worker("repricer")
    first = wait_job(api, reprice(api, 31, "19.90", "promo-31-a"), worker=worker)
    again = wait_job(api, reprice(api, 31, "19.90", "promo-31-a"), worker=worker)
    assert first["state"] == again["state"] == "finished"
    assert first["result"] == {"applied": True, "product_id": 31, "price": "19.90"}
    assert again["result"] == {"applied": False, "reason": "already applied", "product_id": 31, "price": "19.90"}
    assert marketplace.statuses("/api/v1/products/31/") == [200]  # the marketplace saw it once
    assert str(Product.objects.get(product_id=31).price) == "19.90"
    change = PriceChange.objects.get()
    assert (change.idempotency_key, change.status) == ("promo-31-a", "applied")


def test_a_new_key_applies_a_new_price(api, marketplace, feature_worker):
    worker = feature_worker("repricer")
    wait_job(api, reprice(api, 32, "10.00", "k-32-1"), worker=worker)
    second = wait_job(api, reprice(api, 32, "12.50", "k-32-2"), worker=worker)
    assert second["result"]["applied"] is True
    assert str(Product.objects.get(product_id=32).price) == "12.50"
    assert PriceChange.objects.filter(status="applied").count() == 2


def test_a_reused_key_for_another_price_is_refused_for_good(api, marketplace, feature_worker):
    worker = feature_worker("repricer")
    wait_job(api, reprice(api, 33, "10.00", "k-33"), worker=worker)
    response = api.post(
        "/features/repricer/", {"product_id": 33, "price": "99.00", "idempotency_key": "k-33"}, format="json"
    )
    assert response.status_code == 409  # refused at once now, not by a job that fails (issue 19)
    assert "already used for product 33 at 10.00" in response.json()["detail"]
    assert queues.get_queue("repricer").count == 0
    assert str(Product.objects.get(product_id=33).price) == "10.00"


def test_a_failed_price_change_is_not_retried(api, marketplace, feature_worker):
    marketplace.fault("/api/v1/products/34/", {"status": 500}, repeat=True)
    worker = feature_worker("repricer")
    job_id = reprice(api, 34, "15.00", "k-34")
    status = wait_job(api, job_id, worker=worker)
    assert status["state"] == "failed"
    assert status["attempt"] == 1
    assert status["attempts_allowed"] == 1
    row = dead_letter(job_id)
    assert (row.reason, row.attempts_made, row.attempts_allowed) == ("exhausted", 1, 1)
    assert row.exc_type == "features.marketplace.client.MarketplaceUnavailable"
    assert marketplace.statuses("/api/v1/products/34/") == [500]
    assert PriceChange.objects.get().status == "pending"  # an operator retry re-sends the same key
    assert not Product.objects.filter(product_id=34).exists()


def test_a_products_edits_within_the_window_are_one_job_that_applies_the_last_price(
    api, marketplace, feature_worker, settings
):
    settings.REPRICER_DEBOUNCE_SECONDS = 5  # the three edits below fall in one window
    ids = [reprice(api, 41, price, f"k-41-{i}") for i, price in enumerate(["10.00", "11.00", "12.00"])]
    assert len(set(ids)) == 1  # 202 with the same job id for every edit of the window
    assert sorted(PriceChange.objects.filter(job_id=ids[0]).values_list("idempotency_key", flat=True)) == [
        "k-41-0",
        "k-41-1",
        "k-41-2",
    ]
    status = wait_job(api, ids[0], worker=feature_worker("repricer"))
    assert status["result"] == {"applied": True, "product_id": 41, "price": "12.00", "superseded": ["k-41-0", "k-41-1"]}
    assert marketplace.statuses("/api/v1/products/41/") == [200]  # one marketplace call for three edits
    assert str(Product.objects.get(product_id=41).price) == "12.00"
    rows = {c.idempotency_key: c for c in PriceChange.objects.filter(job_id=ids[0])}
    assert {k: c.status for k, c in rows.items()} == {
        "k-41-0": "superseded",
        "k-41-1": "superseded",
        "k-41-2": "applied",
    }
    assert {rows[k].superseded_by_id for k in ("k-41-0", "k-41-1")} == {rows["k-41-2"].pk}  # closed by the last
    assert PriceChange.objects.filter(status="pending").count() == 0


def test_an_owners_pushes_go_through_the_queues_rate_and_wait_held_beyond_it(
    api, marketplace, feature_worker, settings, queue_redis
):
    """The repricer's jobs use the queue's limit (issue 35, §2): the owner's key, at ``REPRICER_RATE``. With its
    budget spent, the next window's job is held by the rate when due: no worker taken, no attempt spent."""
    settings.REPRICER_RATE = "1/hour"
    worker = feature_worker("repricer")
    first = wait_job(api, reprice(api, 42, "10.00", "k-42-0"), worker=worker)
    assert first["result"]["applied"] is True
    job_id = reprice(api, 42, "11.00", "k-42-1")  # a new window (the first job ran): a new job
    key = f"repricer:owner:{api.user.pk}"
    assert queues.fetch_job(job_id).meta["limit_rate"] == {"key": key, "count": 1, "seconds": 3600.0}
    wait_for(lambda: queues.job_state(job_id).state == "held", timeout=60, message=f"job {job_id} held by its rate")
    state = queues.job_state(job_id)
    assert state.attempt in (None, 0, 1)  # held is no attempt spent
    assert marketplace.statuses("/api/v1/products/42/") == [200]  # the second push waits for the next token
    assert PriceChange.objects.get(idempotency_key="k-42-1").status == "pending"


def test_the_admin_lists_superseded_changes_with_the_change_that_superseded_them(admin_client):
    applied = PriceChange.objects.create(idempotency_key="k-43-1", product_id=43, price="2.00", status="applied")
    PriceChange.objects.create(
        idempotency_key="k-43-0", product_id=43, price="1.00", status="superseded", superseded_by=applied
    )
    response = admin_client.get("/admin/repricer/pricechange/", {"status__exact": "superseded"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "k-43-0" in page and "superseded" in page
    assert "k-43-1: product 43 -&gt; 2.00 (applied)" in page  # superseded_by, as the row reads
