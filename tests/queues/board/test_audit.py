"""The audit trail: one row per operator action and object, with who, what, where and the outcome —
for the panel's own actions and for those done through django-rq's views."""

import pytest
from django.test import Client

from queues import audit
from queues.models import AuditEntry
from queues.worker import pause
from tests.support.panel import BASIC_PASSWORD, BASIC_USER, basic_header, dead_job, make_staff

pytestmark = pytest.mark.django_db

DEFAULT = 1  # django-rq's index of 'default'


def rows():
    return list(AuditEntry.objects.order_by("id").values_list("identity", "action", "queue", "job_ids", "outcome"))


@pytest.fixture
def dev(settings):
    settings.OPTIMA_ENV = "dev"
    return Client()


def test_record_with_an_identity_string(queue_redis):
    entry = audit.record("cron:nightly", "discard", "default", ["a", "b"], "ok", "done")
    assert (entry.identity, entry.user, entry.action, entry.queue, entry.job_ids, entry.outcome, entry.detail) == (
        "cron:nightly",
        None,
        "discard",
        "default",
        ["a", "b"],
        "ok",
        "done",
    )
    assert entry.prefix.startswith("test-")


def test_record_with_a_user(django_user_model):
    user = django_user_model.objects.create_user("alice", password="pw-for-tests-1")
    entry = audit.record(user, "pause", "default")
    assert (entry.identity, entry.user_id) == ("alice", user.pk)


def test_record_keeps_the_first_thousand_ids_and_says_how_many():
    entry = audit.record("x", "requeue_all", "default", [str(i) for i in range(1500)], "ok", "requeued 1500")
    assert len(entry.job_ids) == 1000
    assert entry.detail == "requeued 1500 (1500 jobs in all; the first 1000 ids are listed)"


def test_pause_and_resume_are_audited_with_the_basic_auth_identity(settings, queue_redis):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = BASIC_USER
    settings.QUEUE_BOARD_PASSWORD = BASIC_PASSWORD
    client = Client()
    client.post("/admin/queues/pause/default/", **basic_header())
    client.post("/admin/queues/resume/default/", **basic_header())
    assert rows() == [("basic:ops", "pause", "default", [], "ok"), ("basic:ops", "resume", "default", [], "ok")]


def test_staff_actions_are_audited_with_the_user(settings, django_user_model, queue_redis):
    settings.OPTIMA_ENV = "prod"
    user = make_staff(django_user_model, "bob", "queues.act_on_queue_panel")
    client = Client()
    client.force_login(user)
    client.post("/admin/queues/pause/content/")
    entry = AuditEntry.objects.get()
    assert (entry.identity, entry.user_id, entry.action, entry.queue) == ("bob", user.pk, "pause", "content")


def test_refused_actions_write_no_audit_row(settings, django_user_model, queue_redis):
    settings.OPTIMA_ENV = "prod"
    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    assert client.post("/admin/queues/pause/default/").status_code == 403
    assert rows() == []
    assert pause.paused_names() == set()


def test_a_failed_pause_is_audited_as_an_error(dev, queue_redis):
    dev.post("/admin/queues/pause/nope/")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.queue, entry.outcome) == ("pause", "nope", "error")
    assert entry.detail.startswith("Unknown queue 'nope'.")


def test_requeue_from_django_rq_is_audited_and_reopens_nothing(dev, queue_redis):
    job, row = dead_job("default")
    assert dev.post(f"/admin/queues/queues/{DEFAULT}/{job.id}/requeue/").status_code == 302
    assert rows() == [("anonymous (OPTIMA_ENV=dev)", "requeue", "default", [job.id], "ok")]
    row.refresh_from_db()
    assert (row.status, row.retried_as) == ("retried", job.id)


def test_delete_from_django_rq_is_audited_and_discards_the_dead_letter(dev, queue_redis):
    job, row = dead_job("default")
    assert dev.post(f"/admin/queues/queues/{DEFAULT}/{job.id}/delete/").status_code == 302
    assert rows() == [("anonymous (OPTIMA_ENV=dev)", "delete", "default", [job.id], "ok")]
    row.refresh_from_db()
    assert row.status == "discarded"
    assert queue_redis.exists(job.key) == 0


def test_bulk_actions_from_django_rq_write_one_row_per_job(dev, queue_redis):
    made = [dead_job("default") for _ in range(3)]
    ids = [job.id for job, _ in made]
    response = dev.post(f"/admin/queues/queues/actions/{DEFAULT}/", {"action": "requeue", "job_ids": ids})
    assert response.status_code == 302
    assert rows() == [("anonymous (OPTIMA_ENV=dev)", "requeue", "default", [i], "ok") for i in ids]


def test_queue_wide_actions_write_one_row_with_the_count(dev, queue_redis):
    made = [dead_job("default") for _ in range(3)]
    dev.post(f"/admin/queues/queues/{DEFAULT}/failed/clear/")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.queue, sorted(entry.job_ids), entry.outcome, entry.detail) == (
        "delete_all_failed",
        "default",
        sorted(job.id for job, _ in made),
        "ok",
        "deleted 3 failed jobs",
    )


def test_emptying_a_queue_is_audited(dev, queue_redis, django_capture_on_commit_callbacks):
    import queues

    with django_capture_on_commit_callbacks(execute=True):
        job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    dev.post(f"/admin/queues/queues/{DEFAULT}/empty/")
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.job_ids, entry.detail) == ("empty", [job.id], "emptied 1 waiting jobs")


def test_looking_is_not_audited(dev, queue_redis):
    job, _ = dead_job("default")
    dev.get("/admin/queues/")
    dev.get(f"/admin/queues/queues/{DEFAULT}/{job.id}/")
    dev.get(f"/admin/queues/queues/{DEFAULT}/{job.id}/delete/")  # the confirmation page
    assert rows() == []


def test_audit_admin_is_read_only(django_user_model):
    admin_user = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    entry = audit.record("x", "pause", "default")
    client = Client()
    client.force_login(admin_user)
    assert client.get("/admin/queues/auditentry/").status_code == 200
    assert client.get(f"/admin/queues/auditentry/{entry.pk}/change/").status_code == 200
    assert client.post(f"/admin/queues/auditentry/{entry.pk}/change/", {"action": "x"}).status_code == 403
    assert client.get("/admin/queues/auditentry/add/").status_code == 403
    assert client.post(f"/admin/queues/auditentry/{entry.pk}/delete/").status_code == 403
    assert AuditEntry.objects.get().action == "pause"


def test_audit_admin_filters_by_action_and_outcome(django_user_model):
    admin_user = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    audit.record("x", "pause", "default")
    audit.record("x", "retry", "default", ["j1"], "error", "boom")
    client = Client()
    client.force_login(admin_user)
    page = client.get("/admin/queues/auditentry/", {"action": "retry", "outcome": "error"})
    assert [e.job_ids for e in page.context["cl"].result_list] == [["j1"]]
    page = client.get("/admin/queues/auditentry/", {"q": "j1"})
    assert [e.action for e in page.context["cl"].result_list] == ["retry"]


def test_a_forged_log_line_in_a_queue_name_is_escaped(dev, queue_redis):
    import io
    import logging

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    audit_logger = logging.getLogger("queues.audit")
    audit_logger.addHandler(handler)
    try:
        response = dev.post("/admin/queues/pause/x%0AINFO queues.audit: audit: admin pause queue=orders ok%1b[2J/")
    finally:
        audit_logger.removeHandler(handler)
    assert response.status_code == 302
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "WARNING queues.audit: audit: anonymous (OPTIMA_ENV=dev) pause "
        "queue=x\\nINFO queues.audit: audit: admin pause queue=orders ok\\x1b[2J jobs= outcome=error"
    )
    assert AuditEntry.objects.get().queue == "x\nINFO queues.audit: audit: admin pause queue=orders ok\x1b[2J"


@pytest.mark.parametrize(
    "raw, shown",
    [
        ("plain-id", "plain-id"),
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("\x1b[31mred", "\\x1b[31mred"),
        ("tab\there", "tab\\there"),
        ("line\u2028sep", "line\\u2028sep"),
        ("rtl\u202eoverride", "rtl\\u202eoverride"),
        ("back\\nslash", "back\\\\nslash"),
        ("Заказы-ü", "Заказы-ü"),
        (42, "42"),
    ],
)
def test_escape_makes_any_value_one_printable_line(raw, shown):
    from queues.logsafe import escape

    assert escape(raw) == shown
