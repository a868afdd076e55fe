"""Each operator action through each door it has: the panel (a POST from its confirmation page, one job or a
bulk selection, or every job of a queue in one state), the Django admin (its actions on dead letters) and the
JSON API (``DELETE /jobs/<id>/``). Every door goes through the operator service (queues/operator/), so each
gives the same audit row, the same refusal to a viewer (403, or the admin's refusal), the same answer for a job
that changed meanwhile, and the same confirmation rule (a GET never acts). Real Redis, real clients."""

import pytest
from django.test import Client
from rq.registry import FailedJobRegistry

import queues
from queues.catalog.lookup import get_queue
from queues.jobs import read as jobread
from queues.models import AuditEntry, DeadLetter
from queues.operator import actions
from queues.worker.dequeue import Dequeuer
from tests.features.conftest import token_client
from tests.support.panel import dead_job, make_staff

pytestmark = pytest.mark.django_db(transaction=True)  # queues.enqueue writes to Redis on commit

DEFAULT = 1  # the panel's index of "default"
JOB = "tests.jobs.sample.add"
LEAD_PERMS = ("queues.act_on_queue_panel", "queues.view_deadletter", "queues.act_on_deadletter")
VIEWER_PERMS = ("queues.view_queue_panel", "queues.view_deadletter")
DEADLETTERS = "/admin/queues/deadletter/"


def job_url(job_id, suffix=""):
    return f"/admin/queues/queues/{DEFAULT}/{job_id}/{suffix}"


BULK = f"/admin/queues/queues/actions/{DEFAULT}/"


@pytest.fixture
def lead(prod, django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "lead", *LEAD_PERMS))
    return client


@pytest.fixture
def viewer(prod, django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", *VIEWER_PERMS))
    return client


def rows():
    """(action, queue, job_ids, outcome, detail) of every audit row, oldest first."""
    return list(AuditEntry.objects.order_by("id").values_list("action", "queue", "job_ids", "outcome", "detail"))


def said(response):
    return [str(m) for m in response.context["messages"]]


def test_cancel_through_the_job_page_the_bulk_action_and_the_api_writes_the_same_row(lead, queue_redis):
    page, bulk, api = (queues.enqueue("default", JOB, i, 1).id for i in range(3))
    assert lead.post(job_url(page, "cancel/")).status_code == 302
    assert lead.post(BULK, {"action": "cancel", "job_ids": [bulk]}).status_code == 302
    operator = token_client("api-lead", staff_perms=["queues.act_on_queue_panel"])
    assert operator.delete(f"/jobs/{api}/").status_code == 200
    assert get_queue("default").get_job_ids() == []
    done = "canceled (it was queued); it will not run"
    assert rows() == [
        ("cancel", "default", [page], "ok", f"from the panel's job page: {done}"),
        ("cancel", "default", [bulk], "ok", f"bulk cancel of 1 from the panel: {done}"),
        ("cancel", "default", [api], "ok", f"DELETE /jobs/{api}/ by an operator: {done}"),
    ]


def test_cancel_of_a_job_a_worker_took_meanwhile_answers_the_same_at_every_door(lead, queue_redis):
    page, bulk, api = (queues.enqueue("default", JOB, i, 1).id for i in range(3))
    for _ in range(3):
        Dequeuer(queue_redis).pop([get_queue("default")], None)  # a worker's pop, a moment before
    why = "job {} is already running (a worker took it): stop it instead"
    response = lead.post(job_url(page, "cancel/"), follow=True)
    assert said(response) == [f"Job {page} not canceled: {why.format(page)}."]
    response = lead.post(BULK, {"action": "cancel", "job_ids": [bulk]}, follow=True)
    assert said(response) == [f"1 of 1 job not canceled: {bulk}: {why.format(bulk)}."]
    response = token_client("api-lead", staff_perms=["queues.act_on_queue_panel"]).delete(f"/jobs/{api}/")
    assert (response.status_code, response.json()) == (
        409,
        {"detail": f"Not canceled: {why.format(api)}.", "state": "started"},
    )
    assert [(ids, outcome, detail.endswith(why.format(ids[0]))) for _, _, ids, outcome, detail in rows()] == [
        ([page], "error", True),
        ([bulk], "error", True),
        ([api], "error", True),
    ]


def test_requeue_of_a_job_no_longer_failed_answers_changed_meanwhile_at_every_door(lead, queue_redis):
    job, row = dead_job("default")
    assert str(actions.one("ops", "requeue", job.id, queue=get_queue("default"))) == "done"  # someone else, first
    why = "it is not in the failed jobs of default (it is queued)"
    response = lead.post(job_url(job.id, "requeue/"), follow=True)
    assert said(response) == [f"Job {job.id} not requeued: {why}."]
    response = lead.post(BULK, {"action": "requeue", "job_ids": [job.id]}, follow=True)
    assert said(response) == [f"1 of 1 job not requeued: {job.id}: {why}."]
    response = lead.post(f"{DEADLETTERS}{row.pk}/retry/", follow=True)  # its dead letter: retried already
    assert said(response) == ["1 dead letter skipped (already retried, or not open)."]
    assert get_queue("default").get_job_ids() == [job.id]  # once, not three times
    assert [(action, outcome) for action, _, _, outcome, _ in rows()] == [
        ("requeue", "ok"),
        ("requeue", "error"),
        ("requeue", "error"),
        ("retry", "error"),
    ]


def test_a_viewer_is_refused_at_every_door_and_nothing_changes(viewer, queue_redis):
    job, row = dead_job("default")
    queued = queues.enqueue("default", JOB, 1, 2)
    for action in ("delete", "requeue", "enqueue", "stop", "cancel"):
        assert viewer.post(job_url(job.id, f"{action}/")).status_code == 403
    assert viewer.post(BULK, {"action": "delete", "job_ids": [job.id, queued.id]}).status_code == 403
    assert viewer.post(f"{DEADLETTERS}{row.pk}/retry/").status_code == 403
    assert viewer.post(f"{DEADLETTERS}{row.pk}/discard/").status_code == 403
    response = viewer.post(DEADLETTERS, {"action": "discard_selected", "_selected_action": [row.pk], "post": "yes"})
    assert response.status_code == 200  # the admin offers a viewer no action: the POST only lists the rows
    api_viewer = token_client("api-viewer", staff_perms=["queues.view_queue_panel"])
    assert api_viewer.delete(f"/jobs/{queued.id}/").status_code == 403
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    assert get_queue("default").get_job_ids() == [queued.id]
    assert DeadLetter.objects.get().status == "open"
    assert rows() == []


def test_a_get_never_acts_at_any_door(lead, queue_redis):
    job, row = dead_job("default")
    queued = queues.enqueue("default", JOB, 1, 2)
    for action in ("delete", "requeue", "enqueue", "stop"):
        response = lead.get(job_url(job.id, f"{action}/"))
        assert (response.status_code, "Are you sure" in response.content.decode()) == (200, True)
    assert lead.get(job_url(queued.id, "cancel/")).status_code == 200
    assert lead.get(BULK, {"action": "delete", "job_ids": [job.id]}).status_code == 302  # back, nothing done
    for action in ("retry", "discard"):
        assert "are you sure?" in lead.get(f"{DEADLETTERS}{row.pk}/{action}/").content.decode()
    operator = token_client("api-lead", staff_perms=["queues.act_on_queue_panel"])
    assert operator.get(f"/jobs/{queued.id}/").json()["state"] == "queued"
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    assert get_queue("default").get_job_ids() == [queued.id]
    assert DeadLetter.objects.get().status == "open"
    assert rows() == []


def test_delete_from_the_panel_and_discard_from_the_admin_close_the_dead_letter_alike(lead, queue_redis):
    deleted, deleted_row = dead_job("default")
    discarded, discarded_row = dead_job("default")
    lead.post(job_url(deleted.id, "delete/"))
    lead.post(f"{DEADLETTERS}{discarded_row.pk}/discard/")
    assert queue_redis.exists(deleted.key, discarded.key) == 0
    assert FailedJobRegistry("default", connection=queue_redis).get_job_ids() == []
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"discarded"}
    assert [(action, queue, ids, outcome) for action, queue, ids, outcome, _ in rows()] == [
        ("delete", "default", [deleted.id], "ok"),
        ("discard", "default", [discarded.id], "ok"),
    ]


def test_select_across_acts_on_every_failed_job_of_the_queue_matching_the_function(lead, queue_redis):
    adds = [dead_job("default")[0].id for _ in range(7)]
    touch, touch_row = dead_job("default", "tests.jobs.sample.touch", ("/tmp/x",))
    response = lead.post(
        BULK, {"action": "requeue", "select_across": "1", "state": "failed", "func": "sample.add"}, follow=True
    )
    assert said(response) == ["Requeued 7 jobs."]
    assert sorted(get_queue("default").get_job_ids()) == sorted(adds)
    assert FailedJobRegistry("default", connection=queue_redis).get_job_ids() == [touch.id]
    assert set(DeadLetter.objects.exclude(pk=touch_row.pk).values_list("status", flat=True)) == {"retried"}
    [(action, queue, ids, outcome, detail)] = rows()  # one row for the chunk (at most 500 ids)
    assert (action, queue, sorted(ids), outcome) == ("requeue", "default", sorted(adds), "ok")
    assert detail == (
        "bulk requeue of all 7 jobs in state=failed, func containing 'sample.add' from the panel: "
        "7 requeued, 0 changed meanwhile, 0 refused"
    )


def test_select_across_of_an_unknown_state_does_nothing_and_names_the_value(lead, queue_redis):
    job, _ = dead_job("default")
    response = lead.post(BULK, {"action": "delete", "select_across": "1", "state": "dead"}, follow=True)
    assert said(response)[0].startswith("Nothing deleted: state='dead' is not a state the jobs of a queue")
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    assert rows() == []


# --- the queue-wide actions: the panel's buttons and ``queues.perform`` -------------------------------


def test_empty_through_the_panel_and_through_perform_writes_the_same_row(lead, queue_redis, django_user_model):
    first = [queues.enqueue("default", JOB, i, 1).id for i in range(2)]
    assert lead.post(f"/admin/queues/queues/{DEFAULT}/empty/").status_code == 302
    second = [queues.enqueue("default", JOB, i, 1).id for i in range(3)]
    code_lead = make_staff(django_user_model, "code-lead", *LEAD_PERMS)
    outcome = queues.perform(code_lead, "empty", ["default"], confirmed=True)
    assert [(r.target, str(r), r.detail) for r in outcome.results] == [("default", "done", "emptied 3 waiting jobs")]
    assert get_queue("default").get_job_ids() == []
    assert queue_redis.exists(*(jobread.job_key(i) for i in first + second)) == 0
    assert [(a, q, sorted(ids), o, d) for a, q, ids, o, d in rows()] == [
        ("empty", "default", sorted(first), "ok", "emptied 2 waiting jobs"),
        ("empty", "default", sorted(second), "ok", "emptied 3 waiting jobs"),
    ]


@pytest.mark.parametrize(
    ("name", "url", "status", "left"),
    [("delete_all_failed", "failed/clear/", "discarded", []), ("requeue_all", "requeue-all/", "retried", None)],
)
def test_delete_all_and_requeue_all_through_the_panel_and_perform_write_one_row_each(
    lead, queue_redis, name, url, status, left
):
    panel = sorted(dead_job("default")[0].id for _ in range(3))
    assert lead.post(f"/admin/queues/queues/{DEFAULT}/{url}").status_code == 302
    code = sorted(dead_job("default")[0].id for _ in range(2))
    outcome = queues.perform("ops", name, ["default"], confirmed=True)
    verb = "deleted" if name == "delete_all_failed" else "requeued"
    assert [(r.target, str(r), r.detail) for r in outcome.results] == [("default", "done", f"{verb} 2 failed jobs")]
    assert FailedJobRegistry("default", connection=queue_redis).get_job_ids() == []
    expected = sorted(panel + code) if left is None else left
    assert sorted(get_queue("default").get_job_ids()) == expected
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {status}
    assert [(a, q, sorted(ids), o, d) for a, q, ids, o, d in rows()] == [
        (name, "default", panel, "ok", f"{verb} 3 failed jobs"),
        (name, "default", code, "ok", f"{verb} 2 failed jobs"),
    ]


def test_the_queue_wide_actions_refuse_a_viewer_at_every_door_and_an_unconfirmed_final_one(
    viewer, queue_redis, django_user_model
):
    job, row = dead_job("default")
    queued = queues.enqueue("default", JOB, 1, 2)
    for url in ("empty/", "failed/clear/", "requeue-all/"):
        assert viewer.post(f"/admin/queues/queues/{DEFAULT}/{url}").status_code == 403
    code_viewer = make_staff(django_user_model, "code-viewer", *VIEWER_PERMS)
    why = "code-viewer may not {}: it needs the permission queues.act_on_queue_panel"
    for name in ("empty", "delete_all_failed", "requeue_all"):
        outcome = queues.perform(code_viewer, name, ["default"], confirmed=True)
        assert [(str(r), r.detail) for r in outcome.results] == [
            (f"refused: {why.format(name.replace('_', ' '))}", why.format(name.replace("_", " ")))
        ]
    for name in ("empty", "delete_all_failed"):  # final: done only once confirmed, whoever asks
        assert queues.perform("ops", name, ["default"]).first().detail == (
            f"{name.replace('_', ' ')} cannot be undone: it is done only once confirmed"
        )
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    assert get_queue("default").get_job_ids() == [queued.id]
    assert DeadLetter.objects.get().status == "open"
    assert [(a, o) for a, _, _, o, _ in rows()] == [
        ("empty", "error"),
        ("delete_all_failed", "error"),
        ("requeue_all", "error"),
        ("empty", "error"),
        ("delete_all_failed", "error"),
    ]


def test_a_queue_wide_action_on_an_unknown_queue_is_refused_naming_the_declared_ones(queue_redis):
    result = queues.perform("ops", "empty", ["nope"], confirmed=True).first()
    assert (result.kind, result.detail.startswith("Unknown queue 'nope'. Declared queues: ")) == ("refused", True)
    assert "'default'" in result.detail
    assert rows()[0][:4] == ("empty", "nope", [], "error")
