"""DELETE /jobs/<id>/ (issue 13, item 2): the owner cancels a job that has not started; others get
GET's 404; a job running or ended answers 409 saying so; the audit names the owner."""

import pytest
from rq.job import JobStatus
from rq.registry import ScheduledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.models import AuditEntry
from queues.worker.dequeue import Dequeuer
from tests.support.worker import run_burst

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def seller_a(api):
    return api.own(cabinets=[5])


@pytest.fixture
def seller_b(make_api):
    return make_api("seller-b").own(cabinets=[6])


def sync(client, cabinet_id=5):
    response = client.post("/features/orders/sync/", {"cabinet_id": cabinet_id}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


def status_of(connection, job_id):
    return OptimaJob.fetch(job_id, connection=connection).get_status(refresh=True)


def test_the_owner_cancels_a_queued_job_and_gets_its_new_state(seller_a, queue_redis):
    job_id = sync(seller_a)
    response = seller_a.delete(f"/jobs/{job_id}/")
    assert response.status_code == 200
    assert (response.json()["job_id"], response.json()["state"]) == (job_id, "canceled")
    assert seller_a.get(f"/jobs/{job_id}/").json()["state"] == "canceled"
    assert get_queue("orders-sync").get_job_ids() == []
    run_burst(queue_redis, "orders-sync")
    assert status_of(queue_redis, job_id) == JobStatus.CANCELED  # never ran
    rows = list(AuditEntry.objects.values_list("identity", "action", "queue", "job_ids", "outcome", "detail"))
    assert rows == [
        (
            "feature-client",
            "cancel",
            "orders-sync",
            [job_id],
            "ok",
            f"DELETE /jobs/{job_id}/ by its owner {seller_a.user.pk}: canceled (it was queued); it will not run",
        )
    ]


def test_another_user_gets_the_same_404_as_get_and_the_job_stays_queued(seller_a, seller_b, queue_redis):
    job_id = sync(seller_a)
    refused = seller_b.delete(f"/jobs/{job_id}/")
    assert refused.status_code == 404
    assert (
        refused.json()
        == seller_b.get(f"/jobs/{job_id}/").json()
        == {"detail": f"No job {job_id!r} (never enqueued, or expired)."}
    )
    assert seller_b.delete("/jobs/0123456789abcdef/").json() == {
        "detail": "No job '0123456789abcdef' (never enqueued, or expired)."
    }
    assert status_of(queue_redis, job_id) == JobStatus.QUEUED
    assert AuditEntry.objects.count() == 0


def test_staff_who_may_only_view_get_403_and_staff_who_may_act_cancel(seller_a, make_api, queue_redis):
    job_id = sync(seller_a)
    viewer = make_api("operator", staff_perms=["queues.view_queue_panel"])
    actor = make_api("lead-operator", staff_perms=["queues.act_on_queue_panel"])
    assert viewer.delete(f"/jobs/{job_id}/").status_code == 403
    assert status_of(queue_redis, job_id) == JobStatus.QUEUED
    assert actor.delete(f"/jobs/{job_id}/").status_code == 200
    assert list(AuditEntry.objects.values_list("identity", "outcome")) == [("lead-operator", "ok")]


def test_a_delayed_job_of_the_owner_is_canceled(seller_a, queue_redis):
    job = queues.enqueue_call(
        "orders-sync", "features.orders.jobs.sync_cabinet", [5], delay=3600, meta={"owner": seller_a.user.pk}
    )
    response = seller_a.delete(f"/jobs/{job.id}/")
    assert (response.status_code, response.json()["state"]) == (200, "canceled")
    assert job.id not in ScheduledJobRegistry("orders-sync", connection=queue_redis)


def test_a_job_a_worker_took_answers_409_already_running(seller_a, queue_redis):
    job_id = sync(seller_a)
    Dequeuer(queue_redis).pop([get_queue("orders-sync")], None)  # a worker's pop, a moment before
    response = seller_a.delete(f"/jobs/{job_id}/")
    assert response.status_code == 409
    assert response.json() == {
        "detail": f"Not canceled: job {job_id} is already running (a worker took it): stop it instead.",
        "state": "started",
    }
    assert list(AuditEntry.objects.values_list("action", "outcome")) == [("cancel", "error")]


def test_a_finished_or_failed_job_answers_409_with_its_state(seller_a, queue_redis):
    done = queues.enqueue_call("orders-sync", "tests.jobs.sample.add", [1, 2], meta={"owner": seller_a.user.pk})
    dead = queues.enqueue_call(
        "orders-sync", "tests.jobs.sample.fail", [], attempts=1, meta={"owner": seller_a.user.pk}
    )
    run_burst(queue_redis, "orders-sync")
    for job, state in ((done, "finished"), (dead, "failed")):
        response = seller_a.delete(f"/jobs/{job.id}/")
        assert response.status_code == 409
        assert response.json() == {
            "detail": f"Not canceled: job {job.id} is already {state}: only a queued or scheduled job can be canceled.",
            "state": state,
        }
    canceled = sync(seller_a)
    assert seller_a.delete(f"/jobs/{canceled}/").status_code == 200
    again = seller_a.delete(f"/jobs/{canceled}/")
    assert (again.status_code, again.json()["state"]) == (409, "canceled")
