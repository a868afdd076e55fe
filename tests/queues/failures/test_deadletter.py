"""Dead letters: every path into them with real workers, the mirror's idempotency, reconcile."""

import io
import math

import pytest
from django.core.management import call_command
from rq.registry import FailedJobRegistry

import queues
from queues.conf import prefix
from queues.failures import deadletter
from queues.models import NUL_NOTE, DeadLetter, FailureGroup
from tests.support.lifecycle import (
    WORKER_ENV,
    fetch,
    release_now,
    scheduled_score,
    wait_dead,
    wait_row,
    wait_scheduled_for_attempt,
)

pytestmark = pytest.mark.django_db(transaction=True)


def failed_score(connection, name, job_id):
    return connection.zscore(FailedJobRegistry(name, connection=connection).key, job_id)


@pytest.mark.slow
def test_permanent_error_is_dead_at_once_kept_forever_and_mirrored_with_every_field(start_worker, queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.fail_permanently", "cabinet 42 is gone", note="x")
    worker = start_worker("default")
    dead = wait_dead(queue_redis, "default", job.id)
    row = wait_row(job.id)

    assert failed_score(queue_redis, "default", job.id) == math.inf
    assert queue_redis.ttl(dead.key) == -1
    assert queue_redis.ttl(f"{prefix()}:results:{job.id}") == -1
    assert scheduled_score(queue_redis, "default", job.id) is None
    assert (row.prefix, row.queue, row.job_id) == (prefix(), "default", job.id)
    assert (row.func_path, row.args, row.kwargs) == (
        "tests.jobs.lifecycle.fail_permanently",
        ["cabinet 42 is gone"],
        {"note": "x"},
    )
    assert (row.exc_type, row.exc_message) == ("queues.exceptions.PermanentError", "cabinet 42 is gone")
    assert "raise PermanentError(message)" in row.traceback
    assert (row.attempts_made, row.attempts_allowed, row.reason) == (1, 5, "permanent")
    assert row.enqueued_at == dead.enqueued_at
    assert row.first_failed_at == row.dead_at
    assert row.dead_at >= dead.enqueued_at
    assert row.worker == dead.worker_name and row.worker
    assert (row.status, row.times_dead) == ("open", 1)
    assert "Could not mirror" not in worker.output()


@pytest.mark.slow
def test_an_exception_class_the_queue_lists_as_non_retryable_is_dead_at_once(
    start_worker, queue_redis, lifecycle_queue
):
    job = queues.enqueue("lifecycle", "tests.jobs.lifecycle.fail_bad_input")
    start_worker("lifecycle", env=WORKER_ENV)
    row = wait_row(job.id)
    assert (row.exc_type, row.reason, row.attempts_made, row.attempts_allowed) == (
        "tests.jobs.lifecycle.BadInput",
        "permanent",
        1,
        3,
    )


@pytest.mark.slow
def test_a_timeout_is_retried_and_on_the_last_attempt_is_dead_with_reason_timeout(start_worker, queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.sleep", 60, attempts=2, timeout=1)
    start_worker("default", "--without-scheduler")
    wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    release_now(queue_redis, "default", job.id)
    dead = wait_dead(queue_redis, "default", job.id)
    row = wait_row(job.id)
    assert dead.meta["dead"] == "timeout"
    assert (row.reason, row.exc_type, row.attempts_made) == ("timeout", "rq.timeouts.JobTimeoutException", 2)


@pytest.mark.slow
def test_exhausted_attempts_dead_letter_with_the_last_error(start_worker, queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.fail", "still down", attempts=2)
    start_worker("default", "--without-scheduler")
    wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    release_now(queue_redis, "default", job.id)
    row = wait_row(job.id)
    assert (row.reason, row.exc_type, row.exc_message, row.attempts_made) == (
        "exhausted",
        "RuntimeError",
        "still down",
        2,
    )
    assert row.first_failed_at < row.dead_at


def test_bury_dead_letters_a_job_once_however_often_it_and_the_mirror_run(queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.quick", 1)
    job = fetch(job.id, queue_redis)
    exc = "Traceback (most recent call last):\nrq.exceptions.AbandonedJobError: worker killed"
    first = deadletter.bury(job, reason="abandoned", exc_string=exc, worker_name="w1")
    deadletter.bury(fetch(job.id, queue_redis), reason="abandoned", exc_string=exc, worker_name="w1")
    deadletter.mirror(fetch(job.id, queue_redis))
    summary = deadletter.reconcile(["default"])

    assert DeadLetter.objects.filter(job_id=job.id).count() == 1
    row = DeadLetter.objects.get(job_id=job.id)
    assert row.pk == first.pk
    assert (row.reason, row.times_dead, row.status, row.worker) == ("abandoned", 1, "open", "w1")
    assert (row.exc_type, row.exc_message) == ("rq.exceptions.AbandonedJobError", "worker killed")
    assert failed_score(queue_redis, "default", job.id) == math.inf
    assert fetch(job.id, queue_redis).get_status() == "failed"
    assert (summary.mirrored, summary.retried, summary.held) == (0, 0, 0)


@pytest.mark.slow
def test_a_dead_job_requeued_from_the_dashboard_gets_its_attempts_again_and_reopens_its_row_when_it_dies(
    start_worker, queue_redis
):
    def burst():
        assert start_worker("default", "--burst", "--without-scheduler").wait(60) == 0

    job = queues.enqueue("default", "tests.jobs.lifecycle.fail", attempts=2)
    burst()
    release_now(queue_redis, "default", job.id)
    burst()
    assert wait_row(job.id).status == "open"

    FailedJobRegistry("default", connection=queue_redis).requeue(job.id)  # django-rq's "Requeue"
    summary = deadletter.reconcile(["default"])
    assert (summary.retried, DeadLetter.objects.get(job_id=job.id).status) == (1, "retried")

    burst()  # a new life: attempt 1 of 2 again, so the failure is retried, not dead
    again = wait_scheduled_for_attempt(queue_redis, "default", job.id, 2)
    assert "dead" not in again.meta
    assert DeadLetter.objects.get(job_id=job.id).status == "retried"
    release_now(queue_redis, "default", job.id)
    burst()
    row = wait_row(job.id, status="open")
    assert DeadLetter.objects.filter(job_id=job.id).count() == 1
    assert (row.times_dead, row.attempts_made, row.reason) == (2, 2, "exhausted")
    assert fetch(job.id, queue_redis).meta["deaths"] == 2


@pytest.mark.slow
def test_a_database_outage_at_death_neither_stops_the_worker_nor_loses_the_dead_letter_mirrored_later(
    start_worker, queue_redis
):
    dead = queues.enqueue("default", "tests.jobs.lifecycle.fail", "while the db is down", attempts=1)
    after = queues.enqueue("default", "tests.jobs.lifecycle.quick", 7)
    worker = start_worker("default", "--burst", env={"DATABASE_URL": "sqlite:////nonexistent-dir/db.sqlite3"})
    assert worker.wait(60) == 0, worker.output()
    assert "Could not mirror dead job" in worker.output()
    assert fetch(after.id, queue_redis).get_status() == "finished"
    assert DeadLetter.objects.filter(job_id=dead.id).count() == 0

    # The next worker's maintenance (at its start, then every 10 minutes) runs the reconcile.
    assert start_worker("default", "--burst").wait(60) == 0
    row = wait_row(dead.id)
    assert (row.exc_type, row.exc_message, row.reason, row.status) == (
        "RuntimeError",
        "while the db is down",
        "exhausted",
        "open",
    )
    assert "RuntimeError: while the db is down" in row.traceback


def test_reconcile_keeps_the_row_of_a_deleted_job_open_held_only_in_the_database(queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.quick", 1)
    deadletter.bury(fetch(job.id, queue_redis), reason="abandoned")
    fetch(job.id, queue_redis).delete()
    summary = deadletter.reconcile(["default"])
    assert summary.held == 1
    row = DeadLetter.objects.get(job_id=job.id)
    assert (row.status, row.only_in_database_since is not None) == ("open", True)


def test_reconcile_mirrors_a_job_failed_by_rqs_own_paths(queue_redis):
    """E.g. RQ's abandoned-job cleanup: in the failed registry without our meta."""
    from rq.job_lifecycle import record_job_failure

    job = fetch(queues.enqueue("default", "tests.jobs.lifecycle.quick", 1).id, queue_redis)
    with queue_redis.pipeline() as pipe:
        record_job_failure(job, "Moved to FailedJobRegistry, due to AbandonedJobError, at now", pipe)
        pipe.execute()
    out = io.StringIO()
    call_command("queues_reconcile", "default", stdout=out)
    row = DeadLetter.objects.get(job_id=job.id)
    assert (
        out.getvalue().strip() == "Dead letters reconciled: 1 mirrored, 0 marked retried, 0 held only in the "
        "database (1 queues, 0 errors)"
    )
    assert (row.reason, row.times_dead, row.status) == ("abandoned", 1, "open")
    call_command("queues_reconcile", stdout=io.StringIO())
    assert DeadLetter.objects.filter(job_id=job.id).count() == 1


# --- issue 32: a NUL character (13) -----------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    ["marketplace said: <html>\x00\x00</html>", "\x00", "ends with a NUL\x00"],
)
def test_a_nul_in_the_error_or_the_arguments_is_mirrored_escaped_and_says_so(queue_redis, message):
    job = queues.enqueue("default", "tests.jobs.lifecycle.fail_permanently", message, note="a\x00b")
    exc = f"Traceback (most recent call last):\nqueues.exceptions.PermanentError: {message}"
    row = deadletter.bury(fetch(job.id, queue_redis), reason="permanent", exc_string=exc)

    assert row is not None
    row = DeadLetter.objects.get(job_id=job.id)
    shown = message.replace("\x00", "\\x00")
    assert row.exc_message == shown + NUL_NOTE
    assert "\\x00" in row.traceback and "\x00" not in row.traceback
    assert (row.args, row.kwargs) == ([shown], {"note": "a\\x00b"})
    assert "\x00" not in row.fingerprint
    group = FailureGroup.objects.get(fingerprint=row.fingerprint)
    assert "\x00" not in group.example_message + group.pattern


def test_reconcile_mirrors_a_failed_job_with_a_nul_at_every_run_without_an_error(queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.fail_permanently", "a\x00b")
    deadletter.bury(fetch(job.id, queue_redis), reason="permanent", exc_string="ValueError: a\x00b")
    DeadLetter.objects.filter(job_id=job.id).delete()  # as when the mirror failed at the death

    out = io.StringIO()
    call_command("queues_reconcile", "default", stdout=out)
    again = deadletter.reconcile(["default"])

    assert "1 mirrored" in out.getvalue() and "0 errors" in out.getvalue()
    assert (again.mirrored, again.errors) == (0, 0)
    row = DeadLetter.objects.get(job_id=job.id)
    assert (row.status, row.args, row.exc_message) == ("open", ["a\\x00b"], "a\\x00b" + NUL_NOTE)


def test_a_row_without_a_nul_is_stored_as_it_is(queue_redis):
    job = queues.enqueue("default", "tests.jobs.lifecycle.fail_permanently", "a\\x00b, typed by hand")
    row = deadletter.bury(fetch(job.id, queue_redis), reason="permanent", exc_string="ValueError: plain")
    row.refresh_from_db()
    assert (row.exc_message, row.args) == ("plain", ["a\\x00b, typed by hand"])


# --- issue 32: a Redis that lost its data (9), a job stopped from the panel (8c) ---------------------


def dead_rows(connection, n, queue="default"):
    rows = []
    for i in range(n):
        job = queues.enqueue(queue, "tests.jobs.lifecycle.fail_permanently", f"cabinet {i} is gone", note=i)
        rows.append(deadletter.bury(fetch(job.id, connection), reason="permanent", exc_string="PermanentError: x"))
    return rows


def lose_redis(admin_redis):
    """What `dev.py run` restarted (a Redis without persistence), a FLUSHALL or a failover that lost writes
    leaves: nothing under the prefix."""
    from tests.session_env import delete_prefix_keys

    delete_prefix_keys(admin_redis)


def test_a_redis_that_lost_its_data_keeps_every_open_dead_letter_open_held_only_in_the_database(
    queue_redis, admin_redis
):
    rows = dead_rows(queue_redis, 3)
    retried = dead_rows(queue_redis, 1)[0]
    DeadLetter.objects.filter(pk=retried.pk).update(status="retried")  # an operator's, before the loss
    lose_redis(admin_redis)

    first = deadletter.reconcile(["default"])
    again = deadletter.reconcile(["default"])

    assert (first.held, first.retried, first.errors) == (3, 0, 0)
    assert (again.held, again.retried) == (0, 0)  # marked once
    found = {r.pk: (r.status, r.only_in_database_since is not None) for r in DeadLetter.objects.all()}
    assert found == {**{r.pk: ("open", True) for r in rows}, retried.pk: ("retried", False)}
    assert "held only in the database" in str(first)


def test_a_row_held_only_in_the_database_is_retried_from_the_row(queue_redis, admin_redis):
    from queues.failures import operations

    (row,) = dead_rows(queue_redis, 1)
    lose_redis(admin_redis)
    deadletter.reconcile(["default"])

    outcome = operations.retry_dead_letter(row.pk)

    assert outcome.outcome == "ok", outcome.detail
    job = fetch(outcome.job_id, queue_redis)
    assert (job.func_name, job.args, job.kwargs) == (
        "tests.jobs.lifecycle.fail_permanently",
        ["cabinet 0 is gone"],
        {"note": 0},
    )
    assert job.id in get_queue_ids(queue_redis)
    assert DeadLetter.objects.get(pk=row.pk).status == "retried"


def get_queue_ids(connection):
    from queues.catalog.lookup import get_queue

    return get_queue("default").get_job_ids()


def test_only_an_operators_discard_closes_a_row_held_only_in_the_database(queue_redis, admin_redis):
    from queues.failures import operations

    (row,) = dead_rows(queue_redis, 1)
    lose_redis(admin_redis)
    for _ in range(3):
        deadletter.reconcile(["default"])
    assert DeadLetter.objects.get(pk=row.pk).status == "open"
    assert operations.discard_dead_letter(row.pk).outcome == "ok"
    assert DeadLetter.objects.get(pk=row.pk).status == "discarded"


def test_a_job_found_in_redis_again_clears_the_mark(queue_redis):
    (row,) = dead_rows(queue_redis, 1)
    key, failed = f"{prefix()}:job:{row.job_id}", FailedJobRegistry("default", connection=queue_redis).key
    queue_redis.rename(key, f"{key}.away")
    queue_redis.zrem(failed, row.job_id)
    deadletter.reconcile(["default"])
    assert DeadLetter.objects.get(pk=row.pk).only_in_database_since is not None

    queue_redis.rename(f"{key}.away", key)  # e.g. a replica that had it is promoted
    queue_redis.zadd(failed, {row.job_id: "+inf"})
    deadletter.reconcile(["default"])
    row.refresh_from_db()
    assert (row.status, row.only_in_database_since) == ("open", None)


def test_the_admin_shows_and_filters_the_rows_held_only_in_the_database(queue_redis, admin_redis, admin_client):
    held, kept = dead_rows(queue_redis, 2)
    queue_redis.delete(f"{prefix()}:job:{held.job_id}")
    queue_redis.zrem(FailedJobRegistry("default", connection=queue_redis).key, held.job_id)
    deadletter.reconcile(["default"])

    listed = admin_client.get("/admin/queues/deadletter/?where=database").content.decode()
    assert held.job_id in listed and kept.job_id not in listed
    assert "only in the database" in listed
    others = admin_client.get("/admin/queues/deadletter/?where=redis").content.decode()
    assert kept.job_id in others and held.job_id not in others
    page = admin_client.get(f"/admin/queues/deadletter/{held.pk}/change/").content.decode()
    assert "only in the database" in page


@pytest.mark.slow
def test_a_job_stopped_from_the_panel_has_a_dead_letter_stopped_by_an_operator(queue_redis, start_worker, settings):
    from django.test import Client
    from rq.job import JobStatus

    from tests.jobs import sample
    from tests.support import wait_for
    from tests.support.panel import basic_header
    from tests.support.pickles import DEFAULT

    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER, settings.QUEUE_BOARD_PASSWORD = "ops", "s3cret-board-pass"
    client = Client(**basic_header())
    job = queues.enqueue("default", sample.sleep_then_return, 60, attempts=3)
    start_worker("default")
    wait_for(lambda: fetch(job.id, queue_redis).get_status(refresh=True) == JobStatus.STARTED, timeout=60)

    assert client.post(f"/admin/queues/queues/{DEFAULT}/{job.id}/stop/").status_code == 302
    row = wait_row(job.id)
    assert (row.status, row.get_status_display(), row.reason) == ("stopped", "stopped by an operator", "stopped")

    assert client.post(f"/admin/queues/queues/{DEFAULT}/{job.id}/enqueue/").status_code == 302
    row.refresh_from_db()
    assert (row.status, row.retried_as) == ("retried", job.id)
    # The job enqueued again sleeps 60 s in the worker: stopped too, so that the worker's stop at teardown does not
    # wait out its shutdown grace (26 s of the suite).
    wait_for(lambda: fetch(job.id, queue_redis).get_status(refresh=True) == JobStatus.STARTED, timeout=60)
    assert client.post(f"/admin/queues/queues/{DEFAULT}/{job.id}/stop/").status_code == 302
    wait_for(lambda: fetch(job.id, queue_redis).get_status(refresh=True) != JobStatus.STARTED, timeout=60)
