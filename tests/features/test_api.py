"""The feature endpoints through Django's test client on the session's real Redis (no worker):
validation, access, 202 and 503 answers, enqueue-on-commit, job status."""

import socket

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

import queues
from features.content.models import ContentGeneration
from features.sellers.models import Cabinet


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queued_ids(name):
    return queues.get_queue(name).get_job_ids()


def accepted_job(response, owner):
    """The job a 202 names, read back from Redis; its meta names ``owner`` (a user id, or "anonymous" in dev)."""
    assert response.status_code == 202, response.content
    body = response.json()
    job = queues.get_queue(body["queue"]).fetch_job(body["job_id"])
    assert job is not None, f"job {body['job_id']} is not in Redis"
    assert job.meta["owner"] == owner  # "owner": the meta key GET /jobs/<id>/ checks (features/sellers/owners.py)
    return job


@pytest.mark.django_db(transaction=True)
def test_a_sync_request_answers_202_with_the_job_id_and_its_status_url(api):
    api.own(cabinets=[12])
    response = api.post("/features/orders/sync/", {"cabinet_id": 12}, format="json")
    job = accepted_job(response, owner=api.user.id)
    body = response.json()
    assert body["queue"] == "orders-sync"
    assert body["status_url"] == f"/jobs/{body['job_id']}/"
    assert response["Location"] == body["status_url"]
    assert queued_ids("orders-sync") == [body["job_id"]]
    assert job.func_name == "features.orders.jobs.sync_cabinet"
    assert job.args == [12]


@pytest.mark.django_db(transaction=True)
def test_a_second_sync_of_a_waiting_cabinet_returns_the_same_job(api):
    api.own(cabinets=[5, 6])
    first = api.post("/features/orders/sync/", {"cabinet_id": 5}, format="json").json()
    second = api.post("/features/orders/sync/", {"cabinet_id": 5}, format="json").json()
    other = api.post("/features/orders/sync/", {"cabinet_id": 6}, format="json").json()
    assert second["job_id"] == first["job_id"]
    assert other["job_id"] != first["job_id"]
    assert len(queued_ids("orders-sync")) == 2


@pytest.mark.django_db
def test_bad_fields_answer_400_naming_each_field_and_its_value(api):
    response = api.post(
        "/features/repricer/", {"product_id": "abc", "price": -3, "idempotency_key": "has space"}, format="json"
    )
    assert response.status_code == 400
    errors = {e["field"]: e for e in response.json()["errors"]}
    assert sorted(errors) == ["idempotency_key", "price", "product_id"]
    assert errors["product_id"]["value"] == "abc"
    assert errors["product_id"]["messages"] == ["Must be a JSON integer, got a string."]
    assert errors["price"]["messages"] == ["Must be a JSON string, got an integer."]
    assert errors["price"]["value"] == -3
    assert errors["idempotency_key"]["value"] == "has space"
    assert "product_id='abc'" in response.json()["detail"]
    assert queued_ids("repricer") == []


@pytest.mark.django_db
def test_a_missing_field_is_reported_with_a_null_value(api):
    response = api.post("/features/content/", {"product_id": 3}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [{"field": "prompt", "value": None, "messages": ["This field is required."]}]
    assert ContentGeneration.objects.count() == 0


@pytest.mark.django_db
def test_a_body_that_is_not_an_object_is_a_400(api):
    response = api.post("/features/orders/sync/", [1, 2], format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "(body)"


@pytest.mark.django_db
def test_malformed_json_is_a_400_and_form_data_a_415(api):
    bad = api.post("/features/orders/sync/", data="{not json", content_type="application/json")
    form = api.post("/features/orders/sync/", data={"cabinet_id": 1})
    assert bad.status_code == 400
    assert "JSON parse error" in bad.json()["detail"]
    assert bad.json()["errors"][0]["field"] == "(body)"
    assert form.status_code == 415


@pytest.mark.django_db(transaction=True)
def test_anonymous_requests_are_refused_outside_dev_and_allowed_in_dev():
    anonymous = APIClient()
    with override_settings(OPTIMA_ENV="prod"):
        refused = anonymous.post("/features/orders/sync/", {"cabinet_id": 1}, format="json")
        status = anonymous.get("/jobs/abc/")
    with override_settings(OPTIMA_ENV="dev"):
        allowed = anonymous.post("/features/orders/sync/", {"cabinet_id": 1}, format="json")
    assert refused.status_code == 401
    assert "Token" in refused.json()["detail"] or "credentials" in refused.json()["detail"]
    assert status.status_code == 401
    job = accepted_job(allowed, owner="anonymous")
    assert (job.func_name, job.args) == ("features.orders.jobs.sync_cabinet", [1])
    assert queued_ids("orders-sync") == [job.id]


@pytest.mark.django_db(transaction=True)  # the job is written on commit
def test_a_logged_in_session_is_enough(django_user_model):
    user = django_user_model.objects.create_user("seller", password="pw-123456")
    Cabinet.objects.create(cabinet_id=2, owner=user)
    client = APIClient()
    client.force_login(user)
    with override_settings(OPTIMA_ENV="prod"):
        response = client.post("/features/orders/sync/", {"cabinet_id": 2}, format="json")
    job = accepted_job(response, owner=user.id)
    assert (job.func_name, job.args) == ("features.orders.jobs.sync_cabinet", [2])
    assert queued_ids("orders-sync") == [job.id]


@pytest.mark.django_db(transaction=True)
def test_queues_unavailable_a_unique_enqueue_answers_503_with_a_clear_message_and_no_secret(api):
    api.own(cabinets=[1])
    url = f"redis://someone:hunter2-secret@127.0.0.1:{closed_port()}/0"
    with override_settings(QUEUES_REDIS_URL=url):
        sync = api.post("/features/orders/sync/", {"cabinet_id": 1}, format="json")  # unique=: asks Redis first
        status = api.get("/jobs/abcdef/")
    for response in (sync, status):
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        assert "unavailable" in response.json()["detail"]
        assert "hunter2" not in response.content.decode()
    assert "nothing was enqueued" in sync.json()["detail"]


@pytest.mark.django_db(transaction=True)
def test_queues_unavailable_a_job_is_accepted_into_the_outbox_and_runs_once_redis_is_back(api):
    from queues.models import OutboxEntry
    from queues.producer import outbox

    api.own(products=[1])
    url = f"redis://someone:hunter2-secret@127.0.0.1:{closed_port()}/0"
    with override_settings(QUEUES_REDIS_URL=url):
        content = api.post("/features/content/", {"product_id": 1, "prompt": "red shoes"}, format="json")
        assert content.status_code == 202, content.content
        job_id = content.json()["job_id"]
        status = api.get(f"/jobs/{job_id}/")  # Redis down: answered from the outbox
    assert status.status_code == 200
    assert (status.json()["state"], status.json()["queue"]) == ("outbox", "content")
    assert api.get(f"/jobs/{job_id}/").json()["state"] == "outbox"  # Redis up, the job not pushed yet
    generation = ContentGeneration.objects.get()
    assert (generation.status, generation.job_id) == ("queued", job_id)  # the row says accepted, not failed
    assert OutboxEntry.objects.get().job_id == job_id

    assert outbox.relay() == (1, 0)
    assert api.get(f"/jobs/{job_id}/").json()["state"] == "queued"
    assert queued_ids("content") == [job_id]
    assert accepted_job(content, owner=api.user.id).id == job_id  # the relayed job keeps its owner


@pytest.mark.django_db(transaction=True)
def test_a_job_still_in_the_outbox_is_canceled_by_deleting_its_row(api):
    from queues.models import AuditEntry, OutboxEntry

    api.own(products=[1])
    with override_settings(QUEUES_REDIS_URL=f"redis://127.0.0.1:{closed_port()}/0"):
        job_id = api.post("/features/content/", {"product_id": 1, "prompt": "red shoes"}, format="json").json()[
            "job_id"
        ]
    OutboxEntry.objects.update(
        claimed_until=timezone.now() + timezone.timedelta(seconds=60), claimed_by="a-relay"
    )  # being pushed right now
    busy = api.delete(f"/jobs/{job_id}/")
    assert (busy.status_code, busy.json()["state"]) == (409, "outbox")
    OutboxEntry.objects.update(claimed_until=None, claimed_by="")
    canceled = api.delete(f"/jobs/{job_id}/")
    assert (canceled.status_code, canceled.json()["state"]) == (200, "canceled")
    assert not OutboxEntry.objects.exists()
    assert api.get(f"/jobs/{job_id}/").status_code == 404
    assert [(a.action, a.outcome) for a in AuditEntry.objects.order_by("id")] == [("cancel", "error"), ("cancel", "ok")]
    assert queued_ids("content") == []


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_the_requests_transaction_waits_for_its_commit(api):
    api.own(products=[4])
    with transaction.atomic():
        response = api.post("/features/content/", {"product_id": 4, "prompt": "blue hat"}, format="json")
        assert response.status_code == 202
        assert queued_ids("content") == []  # not before the commit
    assert queued_ids("content") == [accepted_job(response, owner=api.user.id).id]
    assert ContentGeneration.objects.get().job_id == response.json()["job_id"]


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_request_enqueues_nothing(api):
    class Rollback(Exception):
        pass

    api.own(products=[4])

    with pytest.raises(Rollback), transaction.atomic():
        api.post("/features/content/", {"product_id": 4, "prompt": "blue hat"}, format="json")
        raise Rollback
    assert queued_ids("content") == []
    assert ContentGeneration.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_job_status_of_a_waiting_job(api):
    api.own(products=[8])
    response = api.post(
        "/features/repricer/", {"product_id": 8, "price": "19.90", "idempotency_key": "k-8"}, format="json"
    )
    job_id = accepted_job(response, owner=api.user.id).id
    status = api.get(f"/jobs/{job_id}/")
    assert status.status_code == 200
    body = status.json()
    assert body["job_id"] == job_id
    assert body["queue"] == "repricer"
    assert body["state"] == "scheduled"  # a product's edits are debounced: it waits for its window
    assert body["attempt"] == 1
    assert body["attempts_allowed"] == 1  # the repricer is never retried
    assert body["progress"] is None and body["result"] is None and body["error"] is None
    assert body["dead_reason"] is None


@pytest.mark.django_db
@pytest.mark.parametrize("job_id", ["no-such-job", "bad:id", "x" * 201])
def test_job_status_of_an_unknown_or_malformed_id_is_404(api, job_id):
    response = api.get(f"/jobs/{job_id}/")
    assert response.status_code == 404
    assert "No job" in response.json()["detail"]


@pytest.mark.django_db
def test_the_openapi_schema_documents_every_feature_endpoint():
    response = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    assert sorted(schema["paths"]) == [
        "/batches/{batch_id}/",
        "/features/content/",
        "/features/content/batch/",
        "/features/orders/sync-all/",
        "/features/orders/sync/",
        "/features/reports/",
        "/features/repricer/",
        "/jobs/",
        "/jobs/{job_id}/",
    ]
    assert schema["paths"]["/jobs/"]["get"]["operationId"] == "jobs_list"
    assert sorted(schema["paths"]["/jobs/"]["get"]["responses"]) == ["200", "400", "401", "403", "503"]
    assert sorted(schema["paths"]["/features/repricer/"]["post"]["responses"]) == [
        "202",
        "400",
        "401",
        "403",
        "404",
        "409",
        "413",
        "415",
        "503",
    ]  # 409: an idempotency key reused


def test_without_an_optima_env_setting_the_api_is_not_in_dev_mode(settings):
    from features.permissions import dev_mode

    del settings.OPTIMA_ENV
    assert dev_mode() is False
    settings.OPTIMA_ENV = "dev"
    assert dev_mode() is True
