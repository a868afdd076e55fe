"""``GET /batches/<id>/`` (issue 34): ``queues.batch_state`` as JSON to the batch's owner, the jobs' owner rule."""

import pytest

import queues

pytestmark = pytest.mark.django_db(transaction=True)  # the batch seals at the commit: no test transaction around it


def open_batch(owner_key):
    with queues.batch(description="sync", meta=queues.owner_meta(owner_key)) as b:
        queues.enqueue("default", "tests.jobs.batches.member", "/dev/null", 1)
    return b.id


def test_a_batch_answers_its_owner(api, queue_redis):
    batch_id = open_batch(api.user.pk)
    response = api.get(f"/batches/{batch_id}/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert {k: body[k] for k in ("id", "state", "total", "pending", "finished", "dead", "canceled")} == {
        "id": batch_id,
        "state": "running",
        "total": 1,
        "pending": 1,
        "finished": 0,
        "dead": 0,
        "canceled": 0,
    }
    assert body["description"] == "sync" and body["finished_at"] is None


def test_another_owners_batch_answers_exactly_like_an_unknown_one(api, make_api, queue_redis):
    batch_id = open_batch(api.user.pk)
    other = make_api("seller-b")
    theirs = other.get(f"/batches/{batch_id}/")
    unknown = other.get("/batches/0123456789abcdef/")
    assert (theirs.status_code, unknown.status_code) == (404, 404)
    assert theirs.json() == {"detail": f"No batch {batch_id!r} (never opened, or expired)."}
    assert unknown.json() == {"detail": "No batch '0123456789abcdef' (never opened, or expired)."}


def test_staff_with_the_panels_view_permission_read_any_batch(make_api, queue_redis):
    batch_id = open_batch("someone-else")
    staff = make_api("operator", staff_perms=["queues.view_queue_panel"])
    assert staff.get(f"/batches/{batch_id}/").json()["id"] == batch_id


def test_a_batch_path_that_is_not_an_id_is_a_json_404(api):
    response = api.get("/batches/a.b/")
    assert response.status_code == 404
    assert api.get("/batches/x").json()["detail"].startswith("No endpoint")
