"""Content generation end to end: progress in the job's meta, result in the database, a timeout."""

import pytest
from django.test import override_settings

from features.content.models import ContentGeneration
from tests.support.features import dead_letter, job_status, wait_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def generate(api, product_id, prompt):
    api.own(products=[product_id])
    response = api.post("/features/content/", {"product_id": product_id, "prompt": prompt}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


@override_settings(CONTENT_GENERATION_SECONDS=3)
def test_generation_reports_progress_then_stores_its_text(api, start_worker):
    worker = start_worker("content")
    job_id = generate(api, 41, "warm woollen socks")
    running = wait_job(api, job_id, states=("started",), worker=worker)
    seen = set()
    while running["state"] == "started":
        if running["progress"]:
            seen.add(running["progress"]["percent"])
        running = job_status(api, job_id)
    final = wait_job(api, job_id, worker=worker)
    assert final["state"] == "finished"
    assert final["progress"] == {"percent": 100, "step": 10, "steps": 10}
    assert any(0 < p < 100 for p in seen), seen
    generation = ContentGeneration.objects.get()
    assert generation.status == "done"
    assert generation.job_id == job_id
    assert generation.text.startswith("Warm makes product 41 stand out (part 1).")
    assert final["result"] == {"generation_id": generation.pk, "characters": len(generation.text)}


@override_settings(CONTENT_GENERATION_SECONDS=30, CONTENT_TIMEOUT=1)
def test_a_generation_past_its_timeout_fails_and_says_why(api, start_worker):
    worker = start_worker("content")
    job_id = generate(api, 42, "slow prompt")
    status = wait_job(api, job_id, worker=worker)
    assert status["state"] == "failed"
    assert status["attempt"] == 2  # the content queue allows one retry
    assert "timeout" in status["error"]
    generation = ContentGeneration.objects.get()
    assert generation.status == "failed"
    assert generation.attempts == 2
    assert generation.error.startswith("JobTimeoutException: Task exceeded maximum timeout value (1 seconds)")
    assert dead_letter(job_id).reason == "timeout"


@override_settings(CONTENT_GENERATION_SECONDS=0.3)
def test_content_for_many_products_is_a_batch_whose_on_complete_records_how_many_succeeded_and_failed(
    api, start_worker
):
    from features.content.models import ContentBatch
    from tests.support import wait_for

    api.own(products=[51, 52, 53])
    response = api.post("/features/content/batch/", {"product_ids": [51, 52, 53], "prompt": "linen"}, format="json")
    assert response.status_code == 202, response.content
    body = response.json()
    assert [j["product_id"] for j in body["jobs"]] == [51, 52, 53]
    ContentGeneration.objects.filter(product_id=52).delete()  # its job then dies: PermanentError, no retry
    worker = start_worker("content")
    record = wait_for(
        lambda: ContentBatch.objects.filter(batch_id=body["batch_id"], completed_at__isnull=False).first(),
        timeout=60,
        message=f"the batch's on_complete; worker log:\n{worker.output()[-3000:]}",
    )
    assert (record.products, record.succeeded, record.failed) == (3, 2, 1)
    state = api.get(body["status_url"]).json()
    assert (state["state"], state["finished"], state["dead"]) == ("completed_with_dead", 2, 1)


def test_a_content_batch_refuses_a_repeated_or_missing_product_and_enqueues_nothing(api, make_api):
    api.own(products=[61, 62])
    make_api("seller-b").own(products=[63])
    twice = api.post("/features/content/batch/", {"product_ids": [61, 61], "prompt": "x"}, format="json")
    none = api.post("/features/content/batch/", {"product_ids": [], "prompt": "x"}, format="json")
    anothers = api.post("/features/content/batch/", {"product_ids": [62, 63], "prompt": "x"}, format="json")
    assert (twice.status_code, none.status_code, anothers.status_code) == (400, 400, 404)
    assert twice.json()["errors"][0]["field"] == "product_ids"
    assert "Each product may appear once" in twice.content.decode()
    assert ContentGeneration.objects.count() == 0
