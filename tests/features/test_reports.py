"""The worked example of issue 34: syncing all of a seller's cabinets is a batch whose ``on_success``
rebuilds their orders report; each sync a long job that resumes at its page. Real workers, the fake
marketplace over HTTP, the database."""

import signal

import pytest
from django.test import override_settings

from features.orders.models import Order
from features.reports.models import SellerReport
from tests.support import wait_for
from tests.support.features import wait_job

pytestmark = [pytest.mark.django_db(transaction=True)]


def sync_all(api):
    response = api.post("/features/orders/sync-all/")
    assert response.status_code == 202, response.content
    body = response.json()
    assert response["Location"] == body["status_url"]
    return body


def report_of(api):
    response = api.get("/features/reports/")
    return response.json() if response.status_code == 200 else None


def test_before_any_sync_the_report_is_a_404_that_says_how_to_build_it(api):
    response = api.get("/features/reports/")
    assert response.status_code == 404
    assert "POST /features/orders/sync-all/" in response.json()["detail"]


@pytest.mark.slow
def test_syncing_all_cabinets_is_a_batch_whose_on_success_rebuilds_the_report_once(api, marketplace, feature_worker):
    api.own(cabinets=[41, 42])
    marketplace.set_orders(41, 3)
    marketplace.set_orders(42, 4)
    worker = feature_worker("orders-sync")
    body = sync_all(api)
    assert sorted(j["cabinet_id"] for j in body["jobs"]) == [41, 42]
    report = wait_for(lambda: report_of(api), timeout=60, message=f"the report; worker log:\n{worker.output()[-3000:]}")
    assert (report["cabinets"], report["orders"], report["batch_id"]) == (2, 7, body["batch_id"])
    assert report["revenue"] == str(sum(Order.objects.values_list("total", flat=True)))
    state = api.get(body["status_url"]).json()
    assert (state["state"], state["total"], state["finished"], state["dead"]) == ("succeeded", 2, 2, 0)
    assert SellerReport.objects.count() == 1


@pytest.mark.slow
def test_a_cabinet_whose_sync_dies_leaves_the_batch_completed_with_dead_and_the_report_unbuilt(
    api, marketplace, feature_worker
):
    api.own(cabinets=[43, 44])
    marketplace.fault("/api/v1/cabinets/44/", {"status": 404, "error": "cabinet 44 is not connected"}, repeat=True)
    worker = feature_worker("orders-sync")
    body = sync_all(api)
    for job in body["jobs"]:
        wait_job(api, job["job_id"], worker=worker)
    state = wait_for(
        lambda: (s := api.get(body["status_url"]).json())["state"] != "running" and s,
        timeout=30,
        message="the batch's end",
    )
    assert (state["state"], state["finished"], state["dead"]) == ("completed_with_dead", 1, 1)
    assert report_of(api) is None


@pytest.mark.slow
def test_a_sync_sigtermed_mid_run_resumes_at_its_page_with_no_attempt_spent(api, marketplace, feature_worker):
    api.own(cabinets=[45])
    marketplace.set_orders(45, 60)  # 12 pages of 5
    marketplace.fault("/api/v1/cabinets/45/", {"delay": 0.3}, repeat=True)
    env = {"MARKETPLACE_PAGE_SIZE": "5"}
    first = feature_worker("orders-sync", env=env)
    response = api.post("/features/orders/sync/", {"cabinet_id": 45}, format="json")
    assert response.status_code == 202, response.content
    job_id = response.json()["job_id"]

    def pages():
        return [int(r["query"].split("page=")[1].split("&")[0]) for r in marketplace.requests("/api/v1/cabinets/45/")]

    wait_for(lambda: len(pages()) >= 4, timeout=60, message=f"page 4; worker log:\n{first.output()[-3000:]}")
    first.signal(signal.SIGTERM)  # a deploy
    assert first.wait(60) == 0, first.output()[-3000:]
    stopped_at = max(pages())
    assert stopped_at < 12, "the sync ended before the stop: nothing was paused"
    second = feature_worker("orders-sync", env=env)
    status = wait_job(api, job_id, worker=second)
    assert status["state"] == "finished", status
    assert status["attempt"] == 1  # a pause costs no attempt
    assert status["result"] == {"cabinet_id": 45, "orders": 60}
    seen = pages()
    assert seen[0] == 1 and seen.count(1) == 1, seen  # never again from page 1
    assert sorted(set(seen)) == list(range(1, 13)), seen
    assert [p for p in set(seen) if seen.count(p) > 1] in ([], [stopped_at]), seen  # at most the page in flight twice
    assert Order.objects.filter(cabinet_id=45).count() == 60


@override_settings(OPTIMA_ENV="dev", ORDERS_SYNC_CABINETS=[71, 72])
def test_in_dev_the_anonymous_owners_sync_all_is_the_periodic_syncs_cabinets_claimed_on_first_use():
    from rest_framework.test import APIClient

    from features.sellers.models import Cabinet

    body = APIClient().post("/features/orders/sync-all/").json()
    assert sorted(j["cabinet_id"] for j in body["jobs"]) == [71, 72]
    assert set(Cabinet.objects.values_list("owner__username", flat=True)) == {"dev-anonymous"}
    assert APIClient().get(body["status_url"]).json()["total"] == 2  # every anonymous caller is one owner
