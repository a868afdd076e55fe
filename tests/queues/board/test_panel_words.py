"""Issue 24: the panel says what the API and the docs say (``held``, the job id, "Queues", JSON meta), lists
canceled jobs, and asks before Stop and Enqueue (audited as before). Django test client, real Redis."""

import html as html_lib
import json
import re

import pytest
from django.test import Client
from rq.executions import Execution
from rq.job import JobStatus
from rq.registry import CanceledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.models import AuditEntry
from queues.producer.cancel import cancel_job
from tests.support.panel import finished_job

pytestmark = pytest.mark.django_db(transaction=True)  # queues.enqueue writes to Redis on commit

DEFAULT = 1  # django-rq's index of "default" (queues sorted by name)
JOB = "tests.jobs.sample.add"


@pytest.fixture
def client(settings):
    settings.OPTIMA_ENV = "dev"
    return Client()


def page(client, url):
    response = client.get(url)
    assert response.status_code == 200, f"{url} answered {response.status_code}"
    return response.content.decode()


def breadcrumbs(html):
    found = re.search(r'<div class="breadcrumbs">(.*?)</div>', html, re.S)
    return re.sub(r"\s+", " ", html_lib.unescape(re.sub(r"<[^>]+>", "", found.group(1)))).strip() if found else ""


def started(job):
    """``job`` taken by a worker: off its queue, started, one rq execution in the started registry."""
    job = OptimaJob.fetch(job.id, connection=get_queue("default").connection)
    get_queue("default").remove(job.id)
    job.set_status(JobStatus.STARTED)
    with job.connection.pipeline() as pipe:
        execution = Execution.create(job, 3600, pipeline=pipe, worker_name="panel-words-worker")
        pipe.execute()
    return execution


def test_no_panel_page_says_django_rq_every_breadcrumb_says_queues(client, queue_redis):
    queued = queues.enqueue("default", JOB, 1, 2)
    done = finished_job()
    panel = "/admin/queues/"
    urls = [
        f"{panel}queues/{DEFAULT}/details/",
        f"{panel}workers/{DEFAULT}/",
        f"{panel}schedulers/0/",
        f"{panel}queues/{DEFAULT}/started/",
        f"{panel}queues/{DEFAULT}/canceled/",
        f"{panel}queues/{DEFAULT}/{queued.id}/",
        f"{panel}queues/{DEFAULT}/{queued.id}/delete/",
        f"{panel}queues/{DEFAULT}/{queued.id}/cancel/",
        f"{panel}queues/{DEFAULT}/{done.id}/enqueue/",
        f"{panel}queues/{DEFAULT}/{queued.id}/stop/",
        f"{panel}queues/{DEFAULT}/empty/",
        f"{panel}queues/{DEFAULT}/requeue-all/",
        f"{panel}queues/{DEFAULT}/failed/clear/",
        f"{panel}queues/{DEFAULT}/{done.id}/requeue/",
    ]
    for url in urls:
        html = page(client, url)
        assert "Django RQ" not in html, url
        assert breadcrumbs(html).startswith("Home › Queues"), (url, breadcrumbs(html))
    confirm = client.post(
        f"{panel}queues/confirm-action/{DEFAULT}/", {"action": "delete", "_selected_action": [queued.id]}
    )
    assert "Django RQ" not in confirm.content.decode()
    assert breadcrumbs(confirm.content.decode()).startswith("Home › Queues")


def test_a_held_job_says_held_on_its_page_as_the_api_does(client, queue_redis):
    queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    held = queues.enqueue("default", JOB, 2, limit_key="seller:1", limit_concurrency=1)
    assert queues.job_state(held.id).state == "held"
    html = page(client, f"/admin/queues/queues/{DEFAULT}/{held.id}/")
    heading = re.search(r"<h1>(.*?)</h1>", html, re.S).group(1)
    assert re.search(r'rq-pill[^"]*">held</span>', heading)
    assert "rate_limited" not in html.lower()


def test_the_limit_and_progress_boxes_come_under_the_jobs_heading(client, queue_redis):
    queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    held = queues.enqueue("default", JOB, 2, limit_key="seller:1", limit_concurrency=1)
    held.meta["progress"] = {"step": 1, "of": 4}
    held.save_meta()
    html = page(client, f"/admin/queues/queues/{DEFAULT}/{held.id}/")
    heading, limit, progress = (
        html.index(s) for s in ('<div class="rq-title-row">', 'id="job-limit"', 'id="job-progress"')
    )
    assert heading < limit < progress


def test_meta_is_shown_as_indented_json_not_a_python_dict(client, queue_redis):
    job = queues.enqueue_call("default", JOB, [1, 2], meta={"owner": 7, "note": "ready", "ok": True})
    html = page(client, f"/admin/queues/queues/{DEFAULT}/{job.id}/")
    shown = re.search(r'<pre class="rq-pre job-meta">(.*?)</pre>', html, re.S).group(1).replace("&quot;", '"')
    assert json.loads(shown)["owner"] == 7
    assert json.loads(shown)["ok"] is True
    assert "&#x27;owner&#x27;" not in html and "True" not in shown


def test_the_started_list_names_the_job_id_and_labels_rqs_execution_id(client, queue_redis):
    job = queues.enqueue("default", JOB, 1, 2)
    execution = started(job)
    html = page(client, f"/admin/queues/queues/{DEFAULT}/started/")
    first = re.search(r'<th class="started-job-id">\s*<a href="([^"]+)">([^<]+)</a>', html)
    assert (first.group(1), first.group(2)) == (f"/admin/queues/queues/{DEFAULT}/{job.id}/", job.id)
    assert "rq execution ID" in html
    assert f'<td class="started-execution-id rq-mono">{execution.id}</td>' in html
    assert "<span>Execution ID</span>" not in html


def test_the_queue_page_shows_the_scheduler_pid_of_rqs_lock_or_says_none_holds_it(client, queue_redis):
    html = page(client, f"/admin/queues/queues/{DEFAULT}/details/")
    assert re.search(r'id="scheduler-pid">none \(no worker', html)


def test_the_home_and_queue_page_show_the_pid_of_the_scheduler_holding_the_queues_lock(client, queue_redis):
    from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler

    queue_redis.set(RQScheduler.get_locking_key("default"), "worker-7")  # what rq's scheduler writes
    queue_redis.hset(SCHEDULER_KEY_TEMPLATE % "worker-7", "pid", 4242)
    assert re.search(r'id="scheduler-pid">4242<', page(client, f"/admin/queues/queues/{DEFAULT}/details/"))
    assert "<td>4242</td>" in page(client, "/admin/queues/")


# --- the canceled list ----------------------------------------------------------------------------------


def test_canceled_jobs_are_listed_per_queue_newest_first_and_linked_from_the_queue_page(client, queue_redis):
    first = queues.enqueue("default", JOB, 1, 2)
    second = queues.enqueue("default", JOB, 3, 4)
    other = queues.enqueue("repricer", JOB, 5, 6)
    for job in (first, second, other):
        assert cancel_job(job.id).outcome == "canceled"
    assert first.id in CanceledJobRegistry("default", connection=queue_redis)
    html = page(client, f"/admin/queues/queues/{DEFAULT}/canceled/")
    listed = re.findall(rf'<th><a href="/admin/queues/queues/{DEFAULT}/([^/"]+)/">', html)
    assert listed == [second.id, first.id]
    assert "2 jobs" in html
    assert html.count(">canceled</td>") == 2
    queue_page = page(client, f"/admin/queues/queues/{DEFAULT}/details/")
    assert re.search(rf'<a href="/admin/queues/queues/{DEFAULT}/canceled/" id="canceled-jobs">2</a>', queue_page)


def test_the_canceled_list_of_an_unknown_queue_is_404_and_needs_the_view_permission(
    settings, queue_redis, django_user_model
):
    settings.OPTIMA_ENV = "dev"
    assert Client().get("/admin/queues/queues/99/canceled/").status_code == 404
    settings.OPTIMA_ENV = "prod"
    anonymous = Client().get(f"/admin/queues/queues/{DEFAULT}/canceled/")
    assert anonymous.status_code in (302, 401, 403)


# --- Stop and Enqueue ask first -------------------------------------------------------------------------


def audit_rows():
    return list(AuditEntry.objects.order_by("id").values_list("action", "job_ids", "outcome"))


def test_the_job_page_links_stop_and_enqueue_to_a_confirmation_not_a_one_click_form(client, queue_redis):
    job = queues.enqueue("default", JOB, 1, 2)
    started(job)
    html = page(client, f"/admin/queues/queues/{DEFAULT}/{job.id}/")
    assert f'<a href="/admin/queues/queues/{DEFAULT}/{job.id}/stop/" class="deletelink" id="stop-job">' in html
    assert f'action="/admin/queues/queues/{DEFAULT}/{job.id}/stop/"' not in html
    done = finished_job()
    html = page(client, f"/admin/queues/queues/{DEFAULT}/{done.id}/")
    assert (
        f'<a href="/admin/queues/queues/{DEFAULT}/{done.id}/enqueue/" class="button default" id="enqueue-job">' in html
    )
    assert f'action="/admin/queues/queues/{DEFAULT}/{done.id}/enqueue/"' not in html


def test_stop_asks_first_and_a_get_changes_nothing(client, queue_redis):
    job = queues.enqueue("default", JOB, 1, 2)
    started(job)
    html = page(client, f"/admin/queues/queues/{DEFAULT}/{job.id}/stop/")
    assert "Are you sure you want to <b>Stop</b> job" in html
    assert 'value="Yes, stop it"' in html
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status(refresh=True) == JobStatus.STARTED
    assert audit_rows() == []


def test_enqueue_asks_first_then_the_confirmed_post_enqueues_and_is_audited(client, queue_redis):
    done = finished_job()
    url = f"/admin/queues/queues/{DEFAULT}/{done.id}/enqueue/"
    html = page(client, url)
    assert "Are you sure you want to <b>Enqueue</b> job" in html
    assert "(finished)" in html
    assert get_queue("default").get_job_ids() == []
    assert audit_rows() == []
    response = client.post(url, {"confirm": "Yes, enqueue it"}, follow=True)
    assert response.redirect_chain == [(f"/admin/queues/queues/{DEFAULT}/{done.id}/", 302)]
    assert get_queue("default").get_job_ids() == [done.id]
    assert audit_rows() == [("enqueue", [done.id], "ok")]


# --- the periodic page ----------------------------------------------------------------------------------


def test_a_running_periodic_job_says_started_since_never_started_started(client, queue_redis, lifecycle_schedules):
    import datetime as dt

    from queues.periodic.declare import declared_schedules
    from queues.periodic.plan import register
    from queues.periodic.run import run_schedule

    register(queue_redis)
    schedule = next(s for s in declared_schedules() if s.id == "tick")
    run = run_schedule(schedule, dt.datetime(2026, 12, 1, 13, 12, tzinfo=dt.UTC))
    run.set_status("started")
    queue_redis.hset(run.key, "started_at", "2026-12-01T13:12:36.000000Z")
    html = page(client, "/admin/queues/periodic/")
    row = html[html.index('data-schedule="tick"') :]
    row = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row[: row.index("</tr>")]))
    assert "started since 2026-12-01 13:12:36" in row
    assert "started started" not in row
