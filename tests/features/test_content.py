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
