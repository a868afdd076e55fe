"""Order sync end to end: the view, a real worker, the fake marketplace over HTTP, the database."""

import pytest

from features.orders.models import Order
from tests.support.features import dead_letter, wait_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def sync(api, cabinet_id):
    api.own(cabinets=[cabinet_id])
    response = api.post("/features/orders/sync/", {"cabinet_id": cabinet_id}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


def test_a_sync_stores_every_order_of_the_cabinet(api, marketplace, feature_worker):
    marketplace.set_orders(21, 7)
    worker = feature_worker("orders-sync")
    status = wait_job(api, sync(api, 21), worker=worker)
    assert status["state"] == "finished"
    assert status["result"] == {"cabinet_id": 21, "orders": 7}
    assert status["attempt"] == 1
    orders = list(Order.objects.filter(cabinet_id=21).values_list("external_id", "status", "total"))
    assert len(orders) == 7
    assert orders[0] == ("C21-00001", "confirmed", orders[0][2])
    assert str(orders[0][2]) == "101.01"


def test_a_429_is_retried_no_sooner_than_its_retry_after(api, marketplace, feature_worker):
    marketplace.fault("/api/v1/cabinets/22/", {"status": 429, "retry_after": 3})
    worker = feature_worker("orders-sync")
    status = wait_job(api, sync(api, 22), worker=worker)
    assert status["state"] == "finished"
    assert status["attempt"] == 2
    answers = marketplace.requests("/api/v1/cabinets/22/")
    assert [a["status"] for a in answers] == [429, 200]
    # Honoured: the default backoff would have retried after 1 s; Retry-After asked for 3.
    assert answers[1]["at"] - answers[0]["at"] >= 3.0
    assert Order.objects.filter(cabinet_id=22).count() == 5


def test_a_500_is_retried_with_backoff_until_it_succeeds(api, marketplace, feature_worker):
    marketplace.fault("/api/v1/cabinets/23/", {"status": 500}, {"status": 502})
    worker = feature_worker("orders-sync")
    status = wait_job(api, sync(api, 23), worker=worker)
    assert status["state"] == "finished"
    assert status["attempt"] == 3
    assert status["dead_reason"] is None
    assert marketplace.statuses("/api/v1/cabinets/23/") == [500, 502, 200]
    assert Order.objects.filter(cabinet_id=23).count() == 5


def test_a_permanent_4xx_goes_to_the_dead_letter_at_once(api, marketplace, feature_worker):
    marketplace.fault("/api/v1/cabinets/24/", {"status": 404, "error": "cabinet 24 is not connected"}, repeat=True)
    worker = feature_worker("orders-sync")
    job_id = sync(api, 24)
    status = wait_job(api, job_id, worker=worker)
    assert status["state"] == "failed"
    assert status["error"] == ('MarketplaceRejected: GET <url> answered 404: {"error": "cabinet 24 is not connected"}')
    assert marketplace.url not in status["error"]  # the internal URL stays in the dead-letter admin
    assert status["dead_reason"] == "permanent"
    row = dead_letter(job_id)
    assert row.queue == "orders-sync"
    assert row.reason == "permanent"
    assert row.attempts_made == 1
    assert row.attempts_allowed == 5  # attempts were left: a 4xx is not worth them
    assert row.exc_type == "features.marketplace.client.MarketplaceRejected"
    assert row.args == [24]
    assert marketplace.statuses("/api/v1/cabinets/24/") == [404]
    assert Order.objects.filter(cabinet_id=24).count() == 0


def test_running_the_same_sync_again_updates_rows_without_duplicating_them(api, marketplace, feature_worker):
    marketplace.set_orders(25, 6)
    worker = feature_worker("orders-sync")
    assert wait_job(api, sync(api, 25), worker=worker)["state"] == "finished"
    before = dict(Order.objects.filter(cabinet_id=25).values_list("external_id", "status"))
    marketplace.set_orders(25, 6, revision=1)  # every order moved on one status
    assert wait_job(api, sync(api, 25), worker=worker)["state"] == "finished"
    after = dict(Order.objects.filter(cabinet_id=25).values_list("external_id", "status"))
    assert Order.objects.filter(cabinet_id=25).count() == 6
    assert sorted(after) == sorted(before)
    assert after != before
    assert after["C25-00001"] == "shipped" and before["C25-00001"] == "confirmed"


def test_two_syncs_of_one_cabinet_running_at_once_never_duplicate_rows(api, marketplace, feature_worker):
    marketplace.set_orders(26, 40)
    # Both syncs wait 1.5 s for their answer, so the second starts while the first is in flight.
    marketplace.fault("/api/v1/cabinets/26/", {"delay": 1.5}, {"delay": 1.5})
    workers = [feature_worker("orders-sync"), feature_worker("orders-sync")]
    first = sync(api, 26)
    wait_job(api, first, states=("started",), worker=workers[0])
    second = sync(api, 26)  # the first no longer waits, so this is a new job
    assert second != first
    statuses = [wait_job(api, job_id, worker=workers[1]) for job_id in (first, second)]
    assert [s["state"] for s in statuses] == ["finished", "finished"]
    assert marketplace.statuses("/api/v1/cabinets/26/") == [200, 200]
    assert Order.objects.filter(cabinet_id=26).count() == 40


def test_a_retry_waiting_for_its_delay_shows_the_last_error(api, marketplace, feature_worker):
    marketplace.fault("/api/v1/cabinets/27/", {"status": 429, "retry_after": 4})
    worker = feature_worker("orders-sync")
    job_id = sync(api, 27)
    waiting = wait_job(api, job_id, states=("scheduled",), worker=worker)
    assert waiting["attempt"] == 2
    assert "answered 429" in waiting["error"]
    assert wait_job(api, job_id, worker=worker)["state"] == "finished"


def test_the_cabinet_rate_limit_holds_across_workers_and_defers_the_excess_sync(api, marketplace, feature_worker):
    env = {"MARKETPLACE_RATE_LIMIT": "2/minute", "MARKETPLACE_RATE_LIMIT_MAX_WAIT": "0"}
    workers = [feature_worker("orders-sync", env=env), feature_worker("orders-sync", env=env)]
    for _ in range(2):
        assert wait_job(api, sync(api, 28), worker=workers[0])["state"] == "finished"
    deferred = wait_job(api, sync(api, 28), states=("scheduled", "failed"), worker=workers[1])
    assert deferred["state"] == "scheduled"  # handed back with RetryAfter, not failed
    assert deferred["attempt"] == 2
    assert "marketplace rate limit 2/minute for cabinet-28 reached" in deferred["error"]
    assert marketplace.statuses("/api/v1/cabinets/28/") == [200, 200]  # the third never reached it
