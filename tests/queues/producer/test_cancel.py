"""Stop and cancel from the panel (issue 13, item 2): a running job stopped from its page ends
``stopped``, not retried; a queued or scheduled job canceled ends ``canceled`` and never runs, also
when a worker pops at the same moment; every action is audited with who did it.

Real Redis, in-process burst workers (``run_burst``) and real worker processes.
"""

import logging
import time

import pytest
from django.test import Client
from rq.job import JobStatus
from rq.registry import CanceledJobRegistry, FailedJobRegistry, ScheduledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.keyspace import keys
from queues.models import AuditEntry, DeadLetter
from queues.producer.cancel import cancel_job
from queues.worker.dequeue import Dequeuer
from tests.jobs import sample
from tests.support import wait_for
from tests.support.panel import basic_header
from tests.support.worker import run_burst

pytestmark = pytest.mark.django_db(transaction=True)

DEFAULT = 1  # django-rq's index of "default" (queues sorted by name)


@pytest.fixture
def client(settings):
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = "ops"
    settings.QUEUE_BOARD_PASSWORD = "s3cret-board-pass"
    return Client(**basic_header())


def status_of(connection, job_id):
    return OptimaJob.fetch(job_id, connection=connection).get_status(refresh=True)


def audit_rows():
    return list(AuditEntry.objects.order_by("id").values_list("identity", "action", "job_ids", "outcome"))


# --- cancel: what it does -------------------------------------------------------------------------


def test_a_canceled_queued_job_leaves_its_queue_ends_canceled_and_never_runs(queue_redis, tmp_path):
    marker = tmp_path / "ran"
    job = queues.enqueue("default", sample.touch, str(marker))
    result = cancel_job(job.id)
    assert (result.outcome, result.state) == ("canceled", "canceled")
    assert get_queue("default").get_job_ids() == []
    assert job.id in CanceledJobRegistry("default", connection=queue_redis)
    run_burst(queue_redis)
    assert status_of(queue_redis, job.id) == JobStatus.CANCELED
    assert not marker.exists()


def test_a_delayed_job_is_canceled_out_of_the_scheduled_registry(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2, delay=3600)
    assert cancel_job(job.id).outcome == "canceled"
    assert job.id not in ScheduledJobRegistry("default", connection=queue_redis)
    assert status_of(queue_redis, job.id) == JobStatus.CANCELED


def test_a_retry_waiting_for_its_backoff_is_canceled_and_never_runs_again(queue_redis, settings, tmp_path):
    settings.OPTIMA_QUEUES = {"default": {"backoff": 60.0}}
    job = queues.enqueue("default", sample.fail, "first attempt", attempts=3)
    run_burst(queue_redis)
    registry = ScheduledJobRegistry("default", connection=queue_redis)
    assert job.id in registry  # waiting for its second attempt
    assert cancel_job(job.id).outcome == "canceled"
    assert job.id not in registry
    assert status_of(queue_redis, job.id) == JobStatus.CANCELED
    assert DeadLetter.objects.count() == 0


def test_a_scheduled_job_that_is_due_is_left_to_the_scheduler_and_the_answer_says_retry(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2, delay=3600)
    queue_redis.zadd(ScheduledJobRegistry("default", connection=queue_redis).key, {job.id: int(time.time())})
    result = cancel_job(job.id)
    assert result.outcome == "due"
    assert "cancel it again in a few seconds" in result.detail
    assert status_of(queue_redis, job.id) == JobStatus.SCHEDULED


def test_a_job_a_worker_popped_a_moment_before_is_not_canceled_but_reported_running(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    popped = Dequeuer(queue_redis).pop([get_queue("default")], None)  # the worker's own pop
    assert popped[1] == job.id
    result = cancel_job(job.id)
    assert result.outcome == "running"
    assert result.detail == f"job {job.id} is already running (a worker took it): stop it instead"
    assert status_of(queue_redis, job.id) == JobStatus.QUEUED  # untouched: the worker goes on with it


def test_a_started_job_is_not_canceled_and_the_answer_says_a_worker_took_it(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    Dequeuer(queue_redis).pop([get_queue("default")], None)
    queue_redis.lrem(keys.intermediate_key(get_queue("default").key), 0, job.id)  # the worker's start: out of
    queue_redis.hset(job.key, "status", JobStatus.STARTED.value)  # the lists, status started
    result = cancel_job(job.id)
    assert (result.outcome, result.state) == ("running", "started")
    assert result.detail == f"job {job.id} is already running (a worker took it): stop it instead"  # as docs/api.md


@pytest.mark.parametrize("ending", ["finished", "failed"])
def test_a_job_that_ended_is_not_canceled(queue_redis, ending):
    job = queues.enqueue(
        "default",
        sample.add if ending == "finished" else sample.fail,
        *((1, 2) if ending == "finished" else ()),
        **({} if ending == "finished" else {"attempts": 1}),
    )
    run_burst(queue_redis)
    result = cancel_job(job.id)
    assert (result.outcome, result.state) == ("ended", ending)
    assert result.detail == f"job {job.id} is already {ending}: only a queued or scheduled job can be canceled"
    assert cancel_job("no-such-job").outcome == "gone"


def test_cancels_racing_a_real_worker_never_both_run_and_report_canceled(queue_redis, start_worker, tmp_path):
    jobs = [queues.enqueue("default", sample.touch, str(tmp_path / f"ran-{i}")) for i in range(150)]
    worker = start_worker("default", "--burst")
    outcomes = {}
    for i, job in enumerate(jobs[30:], start=30):  # the worker is busy with the first ones meanwhile
        outcomes[i] = cancel_job(job.id).outcome
    assert worker.wait(120) == 0
    canceled = [i for i, o in outcomes.items() if o == "canceled"]
    running = [i for i, o in outcomes.items() if o == "running"]
    assert sorted(canceled + running) == sorted(outcomes)
    assert canceled  # the cancels outran the worker for some
    for i in canceled:
        assert not (tmp_path / f"ran-{i}").exists(), f"job {i} was reported canceled but ran"
        assert status_of(queue_redis, jobs[i].id) == JobStatus.CANCELED
    for i in running:
        assert (tmp_path / f"ran-{i}").exists(), f"job {i} was reported running but never ran"


def test_a_canceled_job_whose_id_is_still_in_a_queue_is_dropped_with_an_info_not_dead_lettered(
    queue_redis, caplog, tmp_path
):
    marker = tmp_path / "ran"
    job = queues.enqueue("default", sample.touch, str(marker))
    job.cancel()  # rq's own cancel, then the id finds its way back (a give-back, a replayed push)
    queue_redis.rpush(keys.queue_key("default"), job.id)
    good = queues.enqueue("default", sample.add, 2, 3)
    with caplog.at_level(logging.INFO, logger="rq.worker"):
        run_burst(queue_redis)
    assert not marker.exists()
    assert status_of(queue_redis, job.id) == JobStatus.CANCELED
    assert DeadLetter.objects.count() == 0
    assert job.id not in FailedJobRegistry("default", connection=queue_redis)
    assert queue_redis.llen(keys.intermediate_key(keys.queue_key("default"))) == 0
    assert status_of(queue_redis, good.id) == JobStatus.FINISHED
    dropped = [r for r in caplog.records if f"job {job.id} of queue default was canceled: dropped" in r.getMessage()]
    assert [r.levelname for r in dropped] == ["INFO"]


# --- the panel --------------------------------------------------------------------------------------


def test_cancel_from_the_job_page_asks_first_then_cancels_and_audits_who(client, queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    url = f"/admin/queues/queues/{DEFAULT}/{job.id}/cancel/"
    page = client.get(url)
    assert page.status_code == 200
    assert "Are you sure you want to <b>Cancel</b>" in page.content.decode()
    assert status_of(queue_redis, job.id) == JobStatus.QUEUED  # a GET changes nothing
    response = client.post(url, follow=True)
    assert response.redirect_chain == [(f"/admin/queues/queues/{DEFAULT}/{job.id}/", 302)]
    assert [str(m) for m in response.context["messages"]] == [
        f"Job {job.id} canceled (it was queued); it will not run."
    ]
    assert status_of(queue_redis, job.id) == JobStatus.CANCELED
    assert audit_rows() == [("basic:ops", "cancel", [job.id], "ok")]


def test_cancel_from_the_panel_needs_post_csrf_and_the_act_permission(settings, queue_redis, django_user_model):
    from tests.support.panel import make_staff

    settings.OPTIMA_ENV = "prod"
    job = queues.enqueue("default", sample.add, 1, 2)
    url = f"/admin/queues/queues/{DEFAULT}/{job.id}/cancel/"
    viewer = Client(enforce_csrf_checks=True)
    viewer.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    assert viewer.post(url).status_code == 403
    actor = Client(enforce_csrf_checks=True)
    actor.force_login(make_staff(django_user_model, "actor", "queues.act_on_queue_panel"))
    assert actor.post(url).status_code == 403  # no CSRF token
    assert status_of(queue_redis, job.id) == JobStatus.QUEUED
    token = actor.get(url).context["csrf_token"]
    assert actor.post(url, {"csrfmiddlewaretoken": str(token)}).status_code == 302
    assert status_of(queue_redis, job.id) == JobStatus.CANCELED
    assert audit_rows() == [("actor", "cancel", [job.id], "ok")]


def test_bulk_cancel_reports_each_job_and_audits_one_row_per_job(client, queue_redis):
    waiting = queues.enqueue("default", sample.add, 1, 2)
    delayed = queues.enqueue("default", sample.add, 3, 4, delay=3600)
    taken = queues.enqueue("default", sample.add, 5, 6)
    # The worker pops the head of the queue: ``waiting`` (enqueued first).
    queue_redis.lrem(keys.queue_key("default"), 0, taken.id)
    queue_redis.rpush(keys.intermediate_key(keys.queue_key("default")), taken.id)
    response = client.post(
        f"/admin/queues/queues/actions/{DEFAULT}/",
        {"action": "cancel", "job_ids": [waiting.id, "missing", delayed.id, taken.id]},
        follow=True,
    )
    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [
        "Canceled 2 jobs.",
        f"2 of 4 jobs not canceled: missing: no job 'missing' in Redis (never there, deleted, or expired); "
        f"{taken.id}: job {taken.id} is already running (a worker took it): stop it instead.",
    ]
    assert [status_of(queue_redis, j.id) for j in (waiting, delayed, taken)] == [
        JobStatus.CANCELED,
        JobStatus.CANCELED,
        JobStatus.QUEUED,
    ]
    assert [(a, j, o) for _, a, j, o in audit_rows()] == [
        ("cancel", [waiting.id], "ok"),
        ("cancel", ["missing"], "error"),
        ("cancel", [delayed.id], "ok"),
        ("cancel", [taken.id], "error"),
    ]


def test_the_bulk_cancel_confirmation_page_is_django_rqs(client, queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    page = client.post(
        f"/admin/queues/queues/confirm-action/{DEFAULT}/", {"action": "cancel", "_selected_action": [job.id]}
    )
    html = page.content.decode()
    assert page.status_code == 200
    assert '<input type="hidden" name="action" value="cancel" />' in html
    assert status_of(queue_redis, job.id) == JobStatus.QUEUED


# --- stop: kept as it was, audited ------------------------------------------------------------------


def test_stop_from_the_job_page_ends_a_running_job_stopped_not_retried_and_audited(client, queue_redis, start_worker):
    job = queues.enqueue("default", sample.sleep_then_return, 60, attempts=3)
    worker = start_worker("default")
    wait_for(lambda: status_of(queue_redis, job.id) == JobStatus.STARTED, timeout=60, message="the job to start")
    response = client.post(f"/admin/queues/queues/{DEFAULT}/{job.id}/stop/", follow=True)
    assert [str(m) for m in response.context["messages"]] == [f"You have successfully stopped {job.id}"]
    wait_for(lambda: status_of(queue_redis, job.id) == JobStatus.STOPPED, timeout=60, message="the job to stop")
    # The worker's outcome line comes after its decision (failures/handler.py: a retry is scheduled, or the job
    # buried and then logged): once it is written, no retry or requeue can follow.
    wait_for(lambda: f"job {job.id} canceled" in worker.output(), timeout=60, message="the worker's outcome line")
    assert status_of(queue_redis, job.id) == JobStatus.STOPPED
    assert job.id not in ScheduledJobRegistry("default", connection=queue_redis)
    assert get_queue("default").get_job_ids() == []
    assert audit_rows() == [("basic:ops", "stop", [job.id], "ok")]
    said = [
        line.split(" queues.jobs: ")[0].split()[-1] + " " + line.split(" queues.jobs: ")[1].split(":")[0]
        for line in worker.output().splitlines()
        if " queues.jobs: " in line and job.id in line
    ]
    assert said == [f"WARNING job {job.id} canceled"]  # its one outcome line (queues/logs/outcome.py)
