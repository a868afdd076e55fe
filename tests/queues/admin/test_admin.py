"""Dead letters in the admin: list, filters, search, detail, and the retry/discard actions (single and
bulk, confirmed first), with view and act as separate permissions and one audit row per object."""

import json

import pytest
from django.test import Client
from rq.registry import FailedJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.models import AuditEntry, DeadLetter
from tests.support import wait_for
from tests.support.panel import dead_job, make_staff

pytestmark = pytest.mark.django_db

LIST = "/admin/queues/deadletter/"


def listed(response):
    return [row.job_id for row in response.context["cl"].result_list]


def test_list_shows_the_columns_operators_need(viewer, queue_redis):
    _, row = dead_job(
        "default",
        "tests.jobs.sample.add",
        (1, 2),
        exc_type="httpx.ReadTimeout",
        exc_message="read timed out " + "x" * 200,
    )
    response = viewer.get(LIST)
    html = response.content.decode()
    assert response.status_code == 200
    assert listed(response) == [row.job_id]
    assert 'title="httpx.ReadTimeout">ReadTimeout</span>' in html
    assert "read timed out xxxx" in html
    assert "x" * 200 not in html  # the message is shortened
    assert "1/1" in html  # attempts made / allowed


def test_list_filters_by_queue_status_exception_and_date(viewer, queue_redis):
    _, a = dead_job("default", exc_type="ValueError")
    _, b = dead_job("content", exc_type="KeyError")
    DeadLetter.objects.filter(pk=b.pk).update(status="discarded")
    assert listed(viewer.get(LIST, {"queue": "content"})) == [b.job_id]
    assert listed(viewer.get(LIST, {"status__exact": "open"})) == [a.job_id]
    assert listed(viewer.get(LIST, {"exc_type": "KeyError"})) == [b.job_id]
    assert sorted(listed(viewer.get(LIST, {"dead_at__gte": "2000-01-01T00:00:00+00:00"}))) == sorted(
        [a.job_id, b.job_id]
    )


@pytest.mark.parametrize(
    "query, which", [("exact-id-1", "a"), ("sample.touch", "b"), ("kaboom", "a"), ("cabinet-777", "b")]
)
def test_search_by_job_id_function_message_and_argument_text(viewer, queue_redis, query, which):
    _, a = dead_job("default", "tests.jobs.sample.add", (1, 2), exc_message="kaboom", job_id="exact-id-1")
    _, b = dead_job("default", "tests.jobs.sample.touch", ("/tmp/x",), {"content": "cabinet-777"})
    assert listed(viewer.get(LIST, {"q": query})) == [{"a": a, "b": b}[which].job_id]


def test_rows_of_other_environments_are_not_listed(viewer, queue_redis):
    _, row = dead_job("default")
    DeadLetter.objects.create(
        prefix="other-env", queue="default", job_id="elsewhere", func_path="x.y", dead_at=row.dead_at
    )
    assert listed(viewer.get(LIST)) == [row.job_id]


def test_detail_shows_pretty_arguments_traceback_and_a_link_to_the_job(viewer, queue_redis):
    _, row = dead_job("default", "tests.jobs.sample.touch", ("/tmp/x",), {"content": "hello"})
    html = viewer.get(f"{LIST}{row.pk}/change/").content.decode()
    assert '<pre class="queues-json">[\n  &quot;/tmp/x&quot;\n]</pre>' in html
    assert '<pre class="queues-json">{\n  &quot;content&quot;: &quot;hello&quot;\n}</pre>' in html
    assert "RuntimeError: boom" in html
    assert f'href="/admin/queues/queues/1/{row.job_id}/" class="queues-job-link"' in html


def test_detail_says_when_redis_no_longer_has_the_job(viewer, queue_redis):
    job, row = dead_job("default")
    job.delete()
    html = viewer.get(f"{LIST}{row.pk}/change/").content.decode()
    assert f"{row.job_id} (no longer in Redis)" in html


def test_viewer_sees_no_actions_and_cannot_post_them(viewer, queue_redis):
    job, row = dead_job("default")
    response = viewer.get(LIST)
    assert "retry_selected" not in response.content.decode()
    assert 'id="retry-link"' not in viewer.get(f"{LIST}{row.pk}/change/").content.decode()
    assert viewer.post(f"{LIST}{row.pk}/retry/").status_code == 403
    response = viewer.post(LIST, {"action": "retry_selected", "_selected_action": [row.pk], "post": "yes"})
    assert DeadLetter.objects.get().status == "open"
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    assert AuditEntry.objects.count() == 0


def test_act_without_view_permission_is_refused(django_user_model, queue_redis):
    _, row = dead_job("default")
    client = Client()
    client.force_login(make_staff(django_user_model, "blind", "queues.act_on_deadletter"))
    assert client.get(LIST).status_code == 403
    assert client.post(f"{LIST}{row.pk}/retry/").status_code == 403
    assert DeadLetter.objects.get().status == "open"


def test_bulk_retry_asks_for_confirmation_first(actor, queue_redis):
    made = [dead_job("default") for _ in range(3)]
    pks = [row.pk for _, row in made]
    response = actor.post(LIST, {"action": "retry_selected", "_selected_action": pks})
    assert response.status_code == 200
    assert "Retry <strong>3</strong> dead letters?" in response.content.decode()
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"open"}
    assert get_queue("default").count == 0


@pytest.mark.django_db(transaction=True)
def test_bulk_retry_requeues_jobs_still_failed_and_writes_one_audit_row_each(actor, queue_redis):
    made = [dead_job("default") for _ in range(3)]
    pks = [row.pk for _, row in made]
    response = actor.post(LIST, {"action": "retry_selected", "_selected_action": pks, "post": "yes"}, follow=True)
    assert [str(m) for m in response.context["messages"]] == ["3 dead letters retried."]
    assert sorted(get_queue("default").get_job_ids()) == sorted(job.id for job, _ in made)
    assert FailedJobRegistry("default", connection=queue_redis).count == 0
    assert sorted(DeadLetter.objects.values_list("status", "retried_as")) == sorted(
        ("retried", job.id) for job, _ in made
    )
    audit = list(AuditEntry.objects.values_list("identity", "action", "queue", "job_ids", "outcome"))
    assert sorted(audit) == sorted(("actor", "retry", "default", [job.id], "ok") for job, _ in made)


@pytest.mark.django_db(transaction=True)
def test_retry_of_a_job_gone_from_redis_enqueues_a_new_one_and_links_it(actor, queue_redis):
    job, row = dead_job("default", "tests.jobs.sample.add", (20, 22))
    job.delete()
    response = actor.post(f"{LIST}{row.pk}/retry/")
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.status == "retried"
    assert row.retried_as not in ("", job.id)
    new = OptimaJob.fetch(row.retried_as, connection=queue_redis)
    assert (new.func_name, new.args, new.meta["retry_of"], new.get_status()) == (
        "tests.jobs.sample.add",
        [20, 22],
        job.id,
        "queued",
    )
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.job_ids, entry.outcome) == ("retry", [job.id, new.id], "ok")


def test_single_retry_shows_a_confirmation_page_on_get(actor, queue_redis):
    _, row = dead_job("default")
    response = actor.get(f"{LIST}{row.pk}/retry/")
    assert response.status_code == 200
    assert "Retry <strong>1</strong> dead letter?" in response.content.decode()
    assert DeadLetter.objects.get().status == "open"


def test_retry_of_an_already_retried_dead_letter_is_skipped(actor, queue_redis):
    _, row = dead_job("default")
    DeadLetter.objects.filter(pk=row.pk).update(status="retried", retried_as=row.job_id)
    response = actor.post(f"{LIST}{row.pk}/retry/", follow=True)
    assert [str(m) for m in response.context["messages"]] == ["1 dead letter skipped (already retried, or not open)."]
    assert get_queue("default").count == 0
    assert AuditEntry.objects.get().outcome == "error"  # changed meanwhile: nothing done, at every door


def test_discard_removes_the_job_from_redis_and_keeps_the_row(actor, queue_redis):
    job, row = dead_job("default")
    response = actor.post(f"{LIST}{row.pk}/discard/", follow=True)
    assert [str(m) for m in response.context["messages"]] == ["1 dead letter discarded."]
    assert job.id not in FailedJobRegistry("default", connection=queue_redis)
    assert queue_redis.exists(job.key) == 0
    assert DeadLetter.objects.get().status == "discarded"
    entry = AuditEntry.objects.get()
    assert (entry.identity, entry.action, entry.job_ids, entry.outcome, entry.detail) == (
        "actor",
        "discard",
        [job.id],
        "ok",
        "removed from the failed registry, job deleted",
    )


def test_bulk_discard_over_every_filtered_row(actor, queue_redis):
    made = [dead_job("default") for _ in range(4)]
    _, other = dead_job("content")
    response = actor.post(
        f"{LIST}?queue=default",
        {"action": "discard_selected", "select_across": "1", "_selected_action": [made[0][1].pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert sorted(DeadLetter.objects.values_list("queue", "status")) == sorted(
        [("content", "open")] + [("default", "discarded")] * 4
    )
    assert AuditEntry.objects.count() == 4


def test_dead_letters_cannot_be_added_edited_or_deleted_in_the_admin(django_user_model, queue_redis):
    _, row = dead_job("default")
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-for-tests-1"))
    assert client.get(f"{LIST}add/").status_code == 403
    assert client.post(f"{LIST}{row.pk}/delete/").status_code == 403
    assert client.get(f"{LIST}{row.pk}/change/").status_code == 200
    assert DeadLetter.objects.count() == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_real_dead_job_retried_from_the_admin_succeeds_and_a_second_death_reopens_the_row(
    actor, start_worker, queue_redis, tmp_path, django_capture_on_commit_callbacks
):
    import queues

    flag = tmp_path / "upstream-ready"
    job = queues.enqueue("default", "tests.jobs.panel.fail_until_exists", str(flag), attempts=1)
    worker = start_worker("default")
    row = wait_for(
        lambda: DeadLetter.objects.filter(job_id=job.id).first(),
        timeout=60,
        message=f"the dead job mirrored; worker said: {worker.output()}",
    )
    assert (row.status, row.times_dead) == ("open", 1)

    # Retried while the cause is still there: it dies again, and the same row is reopened.
    actor.post(f"{LIST}{row.pk}/retry/")
    wait_for(
        lambda: DeadLetter.objects.filter(pk=row.pk, status="open", times_dead=2).exists(),
        timeout=60,
        message="the row reopened with times_dead=2",
    )
    assert DeadLetter.objects.count() == 1

    flag.write_text("ok")
    actor.post(f"{LIST}{row.pk}/retry/")
    wait_for(
        lambda: OptimaJob.fetch(job.id, connection=queue_redis).get_status() == "finished",
        timeout=60,
        message="the retried job to succeed",
    )
    assert OptimaJob.fetch(job.id, connection=queue_redis).return_value() == "fixed"
    row.refresh_from_db()
    assert (row.status, row.retried_as, row.times_dead) == ("retried", job.id, 2)
    assert [(e.action, e.outcome) for e in AuditEntry.objects.order_by("id")] == [("retry", "ok"), ("retry", "ok")]
    worker.stop()


def test_discard_works_for_a_queue_no_longer_declared(actor, queue_redis, monkeypatch):
    from queues.exceptions import UnknownQueue
    from queues.failures import operations

    job, row = dead_job("content")

    def unknown(name, connection=None):
        raise UnknownQueue(name, ["default"])

    monkeypatch.setattr(operations, "get_queue", unknown)
    actor.post(f"{LIST}{row.pk}/discard/")
    assert DeadLetter.objects.get().status == "discarded"
    assert job.id not in FailedJobRegistry("content", connection=queue_redis)
    assert queue_redis.exists(job.key) == 0


def test_retry_for_a_queue_no_longer_declared_is_an_audited_error(actor, queue_redis, monkeypatch):
    from queues.exceptions import UnknownQueue
    from queues.failures import operations

    _, row = dead_job("content")

    def unknown(name, connection=None):
        raise UnknownQueue(name, ["default"])

    monkeypatch.setattr(operations, "get_queue", unknown)
    response = actor.post(f"{LIST}{row.pk}/retry/", follow=True)
    assert [str(m) for m in response.context["messages"]] == [
        "1 dead letter failed: see the audit trail.",
        "UnknownQueue: Unknown queue 'content'. Declared queues: 'default'. Declare it in settings.OPTIMA_QUEUES or "
        "in a feature app's queues.py (QUEUES = {...}). (the dead letter stays open)",
    ]
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome) == ("retry", "error")
    assert entry.detail.startswith("UnknownQueue: Unknown queue 'content'.")
    assert DeadLetter.objects.get().status == "open"


def _closed_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("still_failed", [True, False], ids=["requeue-in-place", "enqueue-anew"])
def test_retry_while_redis_refuses_leaves_the_row_open_and_tells_the_operator_why(
    actor, queue_redis, settings, still_failed
):
    job, row = dead_job("default", "tests.jobs.sample.add", (1, 2))
    if not still_failed:
        job.delete()
    port = _closed_port()
    settings.QUEUES_REDIS_URL = f"redis://ops:refused-s3cret@127.0.0.1:{port}/0"
    response = actor.post(f"{LIST}{row.pk}/retry/")
    assert response.status_code == 302
    shown = [str(m) for m in response.wsgi_request._messages]
    masked = f"redis://ops:***@127.0.0.1:{port}/0"
    assert shown == [
        "1 dead letter failed: see the audit trail.",
        f"QueueUnavailable: Queue Redis at {masked} is unavailable (ConnectionError). Check that it runs and that "
        "REDIS_URL is right. (the dead letter stays open)",
    ]
    row.refresh_from_db()
    assert (row.status, row.retried_as) == ("open", "")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.job_ids, entry.outcome) == ("retry", [job.id], "error")
    assert masked in entry.detail and "refused-s3cret" not in entry.detail
    del settings.QUEUES_REDIS_URL
    # Once Redis answers again, the same retry goes through.
    actor.post(f"{LIST}{row.pk}/retry/")
    row.refresh_from_db()
    assert row.status == "retried"
    assert row.retried_as in get_queue("default").get_job_ids()


@pytest.mark.django_db(transaction=True)
def test_retry_inside_a_callers_transaction_marks_the_row_only_after_the_write_at_commit(queue_redis, monkeypatch):
    import redis
    from django.db import transaction

    from queues.connection import batch
    from queues.exceptions import QueueUnavailable
    from queues.failures.operations import retry_dead_letter

    job, row = dead_job("default", "tests.jobs.sample.add", (1, 2))
    job.delete()
    with transaction.atomic():
        outcome = retry_dead_letter(row.pk)
        assert DeadLetter.objects.get(pk=row.pk).status == "open"  # the job is written at the commit
    row.refresh_from_db()
    assert (outcome.outcome, row.status, row.retried_as) == ("ok", "retried", outcome.job_id)
    assert get_queue("default").get_job_ids() == [outcome.job_id]

    _, row = dead_job("default", "tests.jobs.sample.add", (3, 4), job_id="second")
    OptimaJob.fetch("second", connection=queue_redis).delete()

    def refuse(*args, **kwargs):
        raise redis.ConnectionError("refused")

    # The write at the commit is one call (queues/producer/write.py: a batch's EVALSHA, a MULTI when it WATCHes):
    # Redis refuses it.
    monkeypatch.setattr(redis.client.Pipeline, "execute", refuse)
    monkeypatch.setattr(batch, "execute_each", refuse)
    with pytest.raises(QueueUnavailable):
        with transaction.atomic():
            retry_dead_letter(row.pk)
    row.refresh_from_db()
    assert (row.status, row.retried_as) == ("open", "")


@pytest.mark.django_db(transaction=True)
def test_cancel_of_a_waiting_retry_cancels_its_job_and_discards_the_dead_letter(actor, queue_redis):
    from rq.job import JobStatus

    (retried, retried_row), (still_open, open_row) = dead_job("default"), dead_job("default")
    actor.post(LIST, {"action": "retry_selected", "_selected_action": [retried_row.pk], "post": "yes"})
    assert get_queue("default").get_job_ids() == [retried.id]
    response = actor.post(LIST, {"action": "cancel_selected", "_selected_action": [retried_row.pk, open_row.pk]})
    assert "Cancel <strong>2</strong> dead letters?" in response.content.decode()
    response = actor.post(
        LIST,
        {"action": "cancel_selected", "_selected_action": [retried_row.pk, open_row.pk], "post": "yes"},
        follow=True,
    )
    assert [str(m) for m in response.context["messages"]] == [
        "1 dead letter canceled (their retry).",
        "1 dead letter skipped (not retried: no retry to cancel).",
    ]
    assert OptimaJob.fetch(retried.id, connection=queue_redis).get_status(refresh=True) == JobStatus.CANCELED
    assert get_queue("default").get_job_ids() == []
    assert dict(DeadLetter.objects.values_list("job_id", "status")) == {retried.id: "discarded", still_open.id: "open"}
    audit = sorted(AuditEntry.objects.filter(action="cancel").values_list("identity", "job_ids", "outcome"))
    assert audit == sorted([("actor", [retried.id], "ok"), ("actor", [still_open.id], "error")])


@pytest.mark.django_db(transaction=True)
def test_retry_of_a_job_gone_from_redis_keeps_its_owner_and_limit_key(queue_redis):
    """The row is all that is left of the job: the retry is still the owner's and still counts
    against the owner's limit key (deadletter.carried)."""
    from queues.failures import deadletter
    from queues.failures.operations import retry_dead_letter
    from queues.producer import limits

    job = queues.enqueue_call(
        "default", "tests.jobs.sample.add", [1, 2], meta={"owner": "user:7"}, limit_key="seller:7", limit_concurrency=2
    )
    job = OptimaJob.fetch(job.id, connection=queue_redis)
    values = deadletter.row_values(job)
    assert json.loads(values["carried"]) == {"limit_concurrency": 2, "limit_key": "seller:7", "owner": "user:7"}
    _, row = dead_job("default", "tests.jobs.sample.add", (1, 2))
    DeadLetter.objects.filter(pk=row.pk).update(carried=values["carried"])
    OptimaJob.fetch(row.job_id, connection=queue_redis).delete()

    outcome = retry_dead_letter(row.pk)
    assert outcome.outcome == "ok", outcome.detail
    retried = OptimaJob.fetch(outcome.job_id, connection=queue_redis)
    assert retried.meta["owner"] == "user:7" and retried.meta["retry_of"] == row.job_id
    assert (limits.split(retried.rate_limit_key)[1], retried.rate_limit_concurrency) == ("seller:7", 2)
    assert deadletter.carried(DeadLetter(carried="not json")) == {}
