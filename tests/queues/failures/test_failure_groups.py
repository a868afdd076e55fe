"""Failure groups: the fingerprint's normalisation, groups kept by the dead-letter mirror (and by
bury_corrupt, reconcile and migration 0004), and the group admin with its confirmed, audited retry
and discard of a whole group."""

import datetime as dt

import pytest
from django.core.management import call_command
from rq.registry import FailedJobRegistry

from queues import conf
from queues.catalog.lookup import get_queue
from queues.failures import deadletter
from queues.failures.fingerprint import fingerprint, pattern, title
from queues.models import AuditEntry, DeadLetter, FailureGroup
from tests.support.panel import dead_job

GROUPS = "/admin/queues/failuregroup/"
LIST = "/admin/queues/deadletter/"


# --- the group's title (pure) ------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc_type, pattern_text, expected",
    [
        ("", pattern("Job stopped by user, work-horse terminated."), "Stopped by an operator"),
        ("builtins.TimeoutError", "GET <url> took <n> s", "TimeoutError: GET <url> took <n> s"),
        ("", "something odd", "(no exception): something odd"),
        ("app.errors.Boom", "", "Boom"),
        ("app.errors.Boom", "x" * 100, "Boom: " + "x" * 79 + "…"),
    ],
)
def test_a_groups_title_says_what_happened_never_a_dash(exc_type, pattern_text, expected):
    assert title(exc_type, pattern_text) == expected


# --- the fingerprint (pure) --------------------------------------------------------------------


@pytest.mark.parametrize(
    "message, expected",
    [
        ("Order 1234 not found", "Order <n> not found"),
        ("GET https://api.example.test/v1/orders/77?page=2 returned 503", "GET <url> returned <n>"),
        ("job 0b0e4a1e-6c1c-4b7e-9a4f-2a3b4c5d6e7f vanished", "job <uuid> vanished"),
        ("job 0B0E4A1E-6C1C-4B7E-9A4F-2A3B4C5D6E7F vanished", "job <uuid> vanished"),
        ("cabinet 5f2d9c0e4b1a77aa is locked", "cabinet <hex> is locked"),
        ("<Session object at 0x7f3a2b1c>", "<Session object at <hex>>"),
        ("mail to ops.team+x@example.co.uk bounced", "mail to <email> bounced"),
        ("took 3.25 s after   2\n retries", "took <n>.<n> s after <n> retries"),
        ("deadbeef and facade stay words", "deadbeef and facade stay words"),  # hex letters alone are words
        ("", ""),
        (None, ""),
    ],
)
def test_pattern_normalises_ids_numbers_uuids_hex_ids_and_urls(message, expected):
    assert pattern(message) == expected


def test_fingerprint_is_equal_for_messages_that_differ_only_in_ids():
    a = fingerprint(
        "features.orders.sync",
        "httpx.HTTPStatusError",
        "404 for https://mp.test/cabinets/12/orders (order 981 of cabinet a1b2c3d4e5)",
    )
    b = fingerprint(
        "features.orders.sync",
        "httpx.HTTPStatusError",
        "404 for https://mp.test/cabinets/7/orders (order 5 of cabinet 9f8e7d6c5b)",
    )
    assert a == b
    assert len(a) == 32 and int(a, 16) >= 0


@pytest.mark.parametrize(
    "other",
    [
        ("features.orders.push", "httpx.HTTPStatusError", "order 1 missing"),  # another function
        ("features.orders.sync", "KeyError", "order 1 missing"),  # another exception
        ("features.orders.sync", "httpx.HTTPStatusError", "order 1 refused"),  # another message
    ],
)
def test_fingerprint_differs_for_another_function_exception_or_message(other):
    assert fingerprint("features.orders.sync", "httpx.HTTPStatusError", "order 2 missing") != fingerprint(*other)


def test_only_the_first_thousand_characters_of_a_message_count():
    head = "x" * 1000
    assert fingerprint("f", "E", head + "tail one") == fingerprint("f", "E", head + "other tail")


# --- groups kept by the mirror ------------------------------------------------------------------


def die(
    name="default",
    message="order 1 failed",
    exc_type="features.orders.OrderError",
    deaths=1,
    job=None,
    at=None,
    func="tests.jobs.sample.add",
):
    """A job dead in Redis whose death (``deaths``-th) is mirrored through deadletter.mirror, as a worker does."""
    if job is None:
        job, _ = dead_job(name, func, row=False)
    job.meta.update(
        {
            "exc_type": exc_type,
            "exc_message": message,
            "deaths": deaths,
            "dead_at": (at or dt.datetime.now(dt.UTC)).isoformat(),
        }
    )
    job.save_meta()
    return job, deadletter.mirror(job)


@pytest.mark.django_db
def test_two_deaths_with_different_ids_in_the_message_land_in_one_group(queue_redis):
    t0 = dt.datetime(2026, 11, 1, 10, 0, tzinfo=dt.UTC)
    _, first = die("default", "order 1234 of https://mp.test/c/1 failed", at=t0)
    _, second = die("content", "order 99 of https://mp.test/c/2 failed", at=t0 + dt.timedelta(minutes=5))
    _, other = die("default", "order 5 refused", at=t0)
    assert first.fingerprint == second.fingerprint != other.fingerprint
    group = FailureGroup.objects.get(fingerprint=first.fingerprint)
    assert (group.prefix, group.count, group.queues) == (conf.prefix(), 2, ["content", "default"])
    assert (group.first_seen, group.last_seen) == (t0, t0 + dt.timedelta(minutes=5))
    assert group.example_id == second.pk and group.example_message == "order 99 of https://mp.test/c/2 failed"
    assert (group.func_path, group.exc_type, group.pattern) == (
        "tests.jobs.sample.add",
        "features.orders.OrderError",
        "order <n> of <url> failed",
    )
    assert FailureGroup.objects.get(fingerprint=other.fingerprint).count == 1
    assert FailureGroup.objects.count() == 2


@pytest.mark.django_db
def test_the_same_death_mirrored_twice_counts_once_and_a_second_death_counts_again(queue_redis):
    job, row = die(message="order 1 failed")
    deadletter.mirror(job)
    assert FailureGroup.objects.get().count == 1
    DeadLetter.objects.filter(pk=row.pk).update(status="retried")  # an operator retried it ...
    die(job=job, message="order 1 failed", deaths=2)  # ... and it died again
    assert FailureGroup.objects.get().count == 2
    assert DeadLetter.objects.get().status == "open"


@pytest.mark.django_db
def test_a_job_that_dies_differently_the_second_time_counts_in_its_new_group(queue_redis):
    job, row = die(message="order 1 failed")
    DeadLetter.objects.filter(pk=row.pk).update(status="retried")
    _, again = die(job=job, message="timeout after 30 s", exc_type="TimeoutError", deaths=2)
    counts = dict(FailureGroup.objects.values_list("fingerprint", "count"))
    assert counts == {row.fingerprint: 1, again.fingerprint: 1}
    assert DeadLetter.objects.get().fingerprint == again.fingerprint


@pytest.mark.django_db
def test_a_corrupt_job_is_grouped_too(queue_redis):
    row = deadletter.bury_corrupt(queue_redis, "broken-1", "default", {b"x": b"\xff"}, "has no 'data' field")
    row2 = deadletter.bury_corrupt(queue_redis, "broken-2", "default", {b"x": b"\x00"}, "has no 'data' field")
    group = FailureGroup.objects.get()
    assert row.fingerprint == row2.fingerprint == group.fingerprint
    assert (group.func_path, group.exc_type, group.count) == ("<corrupt job>", "CorruptJob", 2)


@pytest.mark.django_db
def test_reconcile_groups_rows_written_without_a_fingerprint(queue_redis):
    # Rows as the previous release's workers write them during a deploy: no fingerprint.
    rows = [dead_job("default", exc_type="ValueError", exc_message=f"bad value {i}")[1] for i in range(3)]
    assert {r.fingerprint for r in rows} == {""}
    summary = deadletter.reconcile()
    assert summary.grouped == 3
    group = FailureGroup.objects.get()
    assert (group.count, group.pattern, group.queues) == (3, "bad value <n>", ["default"])
    assert set(DeadLetter.objects.values_list("fingerprint", flat=True)) == {group.fingerprint}
    assert deadletter.reconcile().grouped == 0  # idempotent


# --- the admin ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_group_list_shows_count_first_and_last_seen_queues_example_and_a_link_to_its_rows(viewer, queue_redis):
    _, a = die("default", "order 1 failed")
    _, b = die("content", "order 2 failed")
    die("default", "something else entirely")
    group = FailureGroup.objects.get(fingerprint=a.fingerprint)
    response = viewer.get(GROUPS)
    assert response.status_code == 200
    assert [g.pk for g in response.context["cl"].result_list] == list(
        FailureGroup.objects.order_by("-last_seen", "-id").values_list("pk", flat=True)
    )
    html = response.content.decode()
    assert "order &lt;n&gt; failed" in html
    assert '<td class="field-count">2</td>' in html
    assert '<td class="field-queue_list">content, default</td>' in html
    assert f'href="/admin/queues/deadletter/{b.pk}/change/" class="queues-group-example"' in html
    rows_url = f"{LIST}?fingerprint={group.fingerprint}"
    assert f'href="{rows_url}" class="queues-group-rows"' in html
    listed = viewer.get(rows_url)
    assert sorted(r.job_id for r in listed.context["cl"].result_list) == sorted([a.job_id, b.job_id])
    detail = viewer.get(f"{GROUPS}{group.pk}/change/").content.decode()
    assert group.fingerprint in detail and "group-retry-link" not in detail  # a viewer cannot act


@pytest.mark.django_db
def test_a_stopped_jobs_group_is_titled_stopped_by_an_operator_in_the_list_and_on_its_page(viewer, queue_redis):
    from django.utils import timezone

    from queues import conf

    now = timezone.now()
    group = FailureGroup.objects.create(
        prefix=conf.prefix(),
        fingerprint="f" * 64,
        func_path="tests.jobs.sample.add",
        exc_type="",
        pattern=pattern("Job stopped by user, work-horse terminated."),
        count=1,
        first_seen=now,
        last_seen=now,
    )
    listed = viewer.get(GROUPS).content.decode()
    assert '<span title="">Stopped by an operator</span>' in listed and "-: Job stopped" not in listed
    page = viewer.get(f"{GROUPS}{group.pk}/change/").content.decode()
    assert "Stopped by an operator — tests.jobs.sample.add (1)" in page


@pytest.mark.django_db
def test_dead_letter_list_says_new_group_or_how_often_the_group_was_seen(viewer, queue_redis):
    _, lone = die("default", "a lonely failure")
    _, one = die("default", "order 1 failed")
    _, two = die("default", "order 2 failed")
    html = viewer.get(LIST).content.decode()
    lone_group = FailureGroup.objects.get(fingerprint=lone.fingerprint)
    seen_group = FailureGroup.objects.get(fingerprint=one.fingerprint)
    assert (
        html.count(f'<a class="queues-group queues-group-new" href="{GROUPS}{lone_group.pk}/change/">new group</a>')
        == 1
    )
    assert html.count(f'<a class="queues-group" href="{GROUPS}{seen_group.pk}/change/">seen 2 times</a>') == 2


@pytest.mark.django_db
def test_viewer_cannot_retry_a_group(viewer, queue_redis):
    _, row = die(message="order 1 failed")
    group = FailureGroup.objects.get()
    assert viewer.get(f"{GROUPS}{group.pk}/retry/").status_code == 403
    viewer.post(GROUPS, {"action": "retry_groups", "_selected_action": [group.pk], "post": "yes"})
    assert DeadLetter.objects.get().status == "open"
    assert AuditEntry.objects.count() == 0


@pytest.mark.django_db
def test_group_retry_asks_for_confirmation_first(actor, queue_redis):
    for i in range(3):
        die(message=f"order {i} failed")
    group = FailureGroup.objects.get()
    response = actor.post(GROUPS, {"action": "retry_groups", "_selected_action": [group.pk]})
    html = response.content.decode()
    assert response.status_code == 200
    assert "Retry the <strong>3</strong> open dead letters" in html and group.fingerprint in html
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"open"}
    assert get_queue("default").count == 0 and AuditEntry.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_group_retry_requeues_its_open_rows_and_writes_one_audit_row_naming_the_group(actor, queue_redis):
    made = [die(message=f"order {i} failed") for i in range(3)]
    _, done = die(message="order 9 failed")
    DeadLetter.objects.filter(pk=done.pk).update(status="discarded")  # left alone by the group retry
    _, other = die(message="another failure")
    group = FailureGroup.objects.get(fingerprint=made[0][1].fingerprint)
    response = actor.post(
        GROUPS, {"action": "retry_groups", "_selected_action": [group.pk], "post": "yes"}, follow=True
    )
    assert [str(m) for m in response.context["messages"]] == [
        "3 dead letters retried in 1 failure group (0 skipped, 0 failed)."
    ]
    assert sorted(get_queue("default").get_job_ids()) == sorted(job.id for job, _ in made)
    assert dict(DeadLetter.objects.values_list("job_id", "status")) == {
        **{job.id: "retried" for job, _ in made},
        done.job_id: "discarded",
        other.job_id: "open",
    }
    entry = AuditEntry.objects.get()
    assert (entry.identity, entry.action, entry.queue, entry.outcome) == ("actor", "retry_group", "default", "ok")
    assert sorted(entry.job_ids) == sorted(job.id for job, _ in made)
    assert entry.detail == (
        f"failure group {group.fingerprint} (features.orders.OrderError in tests.jobs.sample.add):"
        " 3 open dead letters, 3 retried, 0 skipped, 0 failed"
    )


@pytest.mark.django_db(transaction=True)
def test_group_discard_from_its_page_is_confirmed_then_discards_and_is_audited(actor, queue_redis):
    made = [die("content", f"order {i} failed") for i in range(2)]
    group = FailureGroup.objects.get()
    confirm = actor.get(f"{GROUPS}{group.pk}/discard/")
    assert confirm.status_code == 200
    assert "Discard the <strong>2</strong> open dead letters" in confirm.content.decode()
    assert DeadLetter.objects.filter(status="open").count() == 2
    response = actor.post(f"{GROUPS}{group.pk}/discard/")
    assert response.status_code == 302 and response.url == f"{GROUPS}{group.pk}/change/"
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"discarded"}
    assert FailedJobRegistry("content", connection=queue_redis).count == 0
    assert all(not queue_redis.exists(job.key) for job, _ in made)
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.queue, entry.outcome) == ("discard_group", "content", "ok")
    assert group.fingerprint in entry.detail and "2 open dead letters, 2 discarded" in entry.detail
    assert FailureGroup.objects.get().count == 2  # deaths seen: a discard does not lower it


@pytest.mark.django_db(transaction=True)
def test_group_retry_keeps_each_rows_own_rules_a_corrupt_row_is_refused(actor, queue_redis):
    deadletter.bury_corrupt(queue_redis, "broken-1", "default", {b"x": b"\xff"}, "has no 'data' field")
    group = FailureGroup.objects.get()
    actor.post(GROUPS, {"action": "retry_groups", "_selected_action": [group.pk], "post": "yes"})
    assert DeadLetter.objects.get().status == "open"
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.outcome) == ("retry_group", "error")
    assert "1 open dead letters, 0 retried, 0 skipped, 1 failed" in entry.detail


# --- migration 0004 on existing rows ---------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_migration_fills_fingerprints_and_groups_of_existing_rows(queue_redis):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    call_command("migrate", "queues", "0003", verbosity=0)
    try:
        # The model as it was at 0003 (later migrations add columns the table does not have yet).
        state = MigrationExecutor(connection).loader.project_state(("queues", "0003_failure_groups"))
        OldDeadLetter = state.apps.get_model("queues", "DeadLetter")
        now = dt.datetime.now(dt.UTC)
        for i in range(5):
            OldDeadLetter.objects.create(
                prefix=conf.prefix(),
                queue=("default", "content")[i % 2],
                job_id=f"old-{i}",
                func_path="features.orders.sync",
                exc_type="KeyError",
                exc_message=f"'order-{i}'",
                dead_at=now - dt.timedelta(minutes=i),
                times_dead=2 if i == 0 else 1,
            )
        OldDeadLetter.objects.create(
            prefix="other-env",
            queue="default",
            job_id="old-x",
            func_path="f",
            exc_type="E",
            exc_message="m 1",
            dead_at=now,
        )
        assert state.apps.get_model("queues", "FailureGroup").objects.count() == 0
    finally:
        call_command("migrate", "queues", verbosity=0)
    mine = FailureGroup.objects.get(prefix=conf.prefix())
    assert (mine.count, mine.queues, mine.pattern) == (6, ["content", "default"], "'order-<n>'")
    assert mine.example_id == DeadLetter.objects.get(job_id="old-0").pk  # the latest death
    assert mine.first_seen == now - dt.timedelta(minutes=4) and mine.last_seen == now
    assert set(DeadLetter.objects.filter(prefix=conf.prefix()).values_list("fingerprint", flat=True)) == {
        mine.fingerprint
    }
    assert FailureGroup.objects.get(prefix="other-env").count == 1
