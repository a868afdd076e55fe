"""The operator service itself (queues/operator/): its table, the permission check, the confirmation rule, the
audit row of each target and the three answers (done / refused / changed meanwhile), and the walk of every job
of a queue in one state. Real Redis; actors are staff users, requests and identity strings."""

import pytest
from django.test import RequestFactory

import queues
from queues.catalog.lookup import get_queue
from queues.models import AuditEntry, DeadLetter
from queues.operator import actions, jobs
from tests.support.panel import dead_job, finished_job, make_staff

pytestmark = pytest.mark.django_db(transaction=True)  # queues.enqueue writes to Redis on commit

JOB = "tests.jobs.sample.add"


def rows():
    return list(AuditEntry.objects.order_by("id").values_list("identity", "action", "queue", "job_ids", "outcome"))


def posted(user, method="post"):
    request = getattr(RequestFactory(), method)("/admin/queues/")
    request.user = user
    return request


def test_the_table_says_what_each_action_acts_on_and_which_cannot_be_undone():
    assert {name: a.acts_on for name, a in actions.ACTIONS.items()} == {
        "delete": "job",
        "requeue": "job",
        "enqueue": "job",
        "stop": "job",
        "cancel": "job",
        "retry": "dead letter",
        "discard": "dead letter",
        "cancel_retry": "dead letter",
        "pause": "queue",
        "resume": "queue",
        "cancel_batch": "batch",
        "empty": "queue",
        "delete_all_failed": "queue",
        "requeue_all": "queue",
        "pause_key": "limit key",
        "resume_key": "limit key",
    }
    final = {name for name, a in actions.ACTIONS.items() if a.final}
    assert final == {
        "delete",
        "stop",
        "cancel",
        "discard",
        "cancel_retry",
        "cancel_batch",
        "empty",
        "delete_all_failed",
    }


def test_an_unknown_action_is_named_with_the_actions_that_exist():
    with pytest.raises(actions.UnknownAction) as raised:
        actions.perform("ops", "obliterate", ["x"])
    assert str(raised.value).startswith("action='obliterate' is no operator action: use one of cancel, ")


def test_a_final_action_not_confirmed_is_refused_audited_and_changes_nothing(queue_redis):
    job, row = dead_job("default")
    outcome = actions.perform("ops", "delete", [job.id], queue=get_queue("default"))
    assert [str(r) for r in outcome.results] == ["refused: delete cannot be undone: it is done only once confirmed"]
    assert queue_redis.exists(job.key) == 1
    row.refresh_from_db()
    assert row.status == DeadLetter.Status.OPEN
    assert rows() == [("ops", "delete", "default", [job.id], "error")]


def test_a_get_request_never_acts_even_confirmed(django_user_model, queue_redis):
    user = make_staff(django_user_model, "lead", "queues.act_on_queue_panel")
    job, _ = dead_job("default", row=False)
    result = actions.one(posted(user, "get"), "requeue", job.id, confirmed=True, queue=get_queue("default"))
    assert str(result) == "refused: requeue is done by a POST from its confirmation page, never by a GET"
    assert get_queue("default").count == 0
    assert rows() == [("lead", "requeue", "default", [job.id], "error")]


def test_an_actor_without_the_permission_is_refused_for_every_target(django_user_model, queue_redis):
    viewer = make_staff(django_user_model, "viewer", "queues.view_queue_panel")
    a, _ = dead_job("default", row=False)
    b, _ = dead_job("default", row=False)
    outcome = actions.perform(posted(viewer), "requeue", [a.id, b.id], confirmed=True, queue=get_queue("default"))
    assert [r.kind for r in outcome.results] == ["refused", "refused"]
    assert outcome.results[0].detail == "viewer may not requeue: it needs the permission queues.act_on_queue_panel"
    assert get_queue("default").count == 0
    assert rows() == [
        ("viewer", "requeue", "default", [a.id], "error"),
        ("viewer", "requeue", "default", [b.id], "error"),
    ]
    # The dead-letter actions ask the dead-letter permission, whatever the panel's.
    lead = make_staff(django_user_model, "lead", "queues.act_on_queue_panel")
    _, row = dead_job("default")
    result = actions.one(posted(lead), "retry", (row.pk, row.queue, row.job_id), confirmed=True)
    assert str(result) == "refused: lead may not retry: it needs the permission queues.act_on_deadletter"


def test_each_target_gets_its_own_answer_and_its_own_audit_row(queue_redis):
    dead, row = dead_job("default")
    done = finished_job("default")
    outcome = actions.perform("ops", "requeue", [dead.id, "gone-job", done.id], queue=get_queue("default"))
    assert [str(r) for r in outcome.results] == ["done", "changed meanwhile: gone", "changed meanwhile: finished"]
    assert outcome.results[2].detail == "it is not in the failed jobs of default (it is finished)"
    assert get_queue("default").get_job_ids() == [dead.id]
    row.refresh_from_db()
    assert (row.status, row.retried_as) == ("retried", dead.id)
    assert rows() == [
        ("ops", "requeue", "default", [dead.id], "ok"),
        ("ops", "requeue", "default", ["gone-job"], "error"),
        ("ops", "requeue", "default", [done.id], "error"),
    ]


def test_a_second_requeue_of_the_same_job_answers_changed_meanwhile(queue_redis):
    dead, _ = dead_job("default")
    queue = get_queue("default")
    assert str(actions.one("ops", "requeue", dead.id, queue=queue)) == "done"
    assert str(actions.one("ops", "requeue", dead.id, queue=queue)) == "changed meanwhile: queued"
    assert queue.get_job_ids() == [dead.id]


def test_a_dead_letter_retried_twice_answers_changed_meanwhile_with_its_status(queue_redis):
    _, row = dead_job("default")
    target = (row.pk, row.queue, row.job_id)
    assert str(actions.one("ops", "retry", target)) == "done"
    second = actions.one("ops", "retry", target)
    assert (str(second), second.outcome, second.audit_outcome) == ("changed meanwhile: retried", "skipped", "error")


def test_pause_and_resume_of_an_unknown_queue_are_refused_naming_it(queue_redis):
    result = actions.one("ops", "pause", "nope")
    assert result.kind == "refused" and result.detail.startswith("Unknown queue 'nope'.")
    assert rows() == [("ops", "pause", "nope", [], "error")]


def test_select_walks_every_job_of_a_state_in_chunks_of_500_and_filters_by_function(queue_redis):
    queues.enqueue_many("default", JOB, [(i, 1) for i in range(1001)])
    touched = queues.enqueue_many("default", "tests.jobs.sample.touch", [("/tmp/a",), ("/tmp/b",)])
    queue = get_queue("default")
    chunks = jobs.select(queue, "queued")
    assert [len(c) for c in chunks] == [500, 500, 3]
    assert jobs.select(queue, "queued", func="Sample.Touch") == [[j.id for j in touched]]
    assert jobs.select(queue, "failed") == []


def test_a_selection_of_an_unknown_state_names_the_field_the_value_and_the_states():
    with pytest.raises(jobs.InvalidSelection) as raised:
        jobs.check_selection("dead")
    assert str(raised.value) == (
        "state='dead' is not a state the jobs of a queue can be selected in: use one of queued, started, "
        "deferred, scheduled, finished, failed, canceled (the tab the selection was made on)."
    )


def test_the_queue_wide_actions_are_checked_by_the_same_rule(django_user_model):
    viewer = make_staff(django_user_model, "viewer", "queues.view_queue_panel")
    assert actions.check("ops", "empty") == "empty cannot be undone: it is done only once confirmed"
    assert actions.check("ops", "requeue_all") == ""
    assert actions.check(posted(viewer), "delete_all_failed", confirmed=True) == (
        "viewer may not delete all failed: it needs the permission queues.act_on_queue_panel"
    )


def test_the_docstring_table_lists_every_action_as_the_table_of_actions_defines_it():
    lines = [line for line in actions.__doc__.splitlines() if line.startswith("| ") and "acts on" not in line]
    table = {cells[0]: cells[1:] for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines)}
    assert table == {
        name: [a.acts_on, a.permission, "yes" if a.final else "no", a.audit] for name, a in actions.ACTIONS.items()
    }
