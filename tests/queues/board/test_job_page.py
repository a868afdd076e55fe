"""The job page (queues/board/job.py) and the one-job actions (queues/board/rq_actions.py), ours since issue 33:
what the page shows (escaped), its attempts (rq's results stream; the result URL redirects to the attempt), its
actions by permission and state, the actions' outcomes and audit rows, and the page's Redis round trips (at most
5 whatever the job holds). Real Redis, the Django test client."""

import html as html_lib
import re

import pytest
import redis
from django.test import Client
from rq.job import Job, JobStatus
from rq.results import Result

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.models import AuditEntry, DeadLetter
from tests.support.panel import dead_job, finished_job, make_staff

pytestmark = pytest.mark.django_db(transaction=True)  # queues.enqueue writes to Redis on commit

DEFAULT = 1  # django-rq's index of "default" (queues sorted by name)
JOB = "tests.jobs.sample.add"
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def client(settings):
    settings.OPTIMA_ENV = "dev"  # open panel: may act
    return Client()


@pytest.fixture
def viewer(prod, django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    return client


def url(job_id, suffix=""):
    return f"/admin/queues/queues/{DEFAULT}/{job_id}/{suffix}"


def page(client, job_id):
    response = client.get(url(job_id))
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def audit_rows():
    return list(AuditEntry.objects.order_by("id").values_list("action", "job_ids", "outcome"))


def failed_five_times(queue_redis, args=(40, 2), kwargs=None):
    """A dead job whose results stream holds 5 failed attempts (newest: "attempt 5"), with a trace id."""
    job, _ = dead_job("default", JOB, args, kwargs=kwargs, row=False, exc_message="attempt 1")
    for n in range(2, 6):
        with queue_redis.pipeline() as pipe:
            Result.create_failure(job, -1, exc_string=f"Traceback ...\nRuntimeError: attempt {n}\n", pipeline=pipe)
            pipe.execute()
    queue_redis.hset(job.key, "optima_trace", TRACE)
    return job


HANDSHAKE = {b"HELLO", b"AUTH", b"CLIENT", b"SELECT"}  # what redis-py sends on connecting, once per connection


class Sends:
    """Redis round trips of this process while counting (one per command sent, one per pipeline: as
    ``devtools/roundtrips.py``), without the handshake of a new connection (``HANDSHAKE``: the panel's bounded
    client connects once per request, whatever the page; counted apart in ``connects``)."""

    def __init__(self, monkeypatch):
        self.count = self.connects = 0
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(conn, command, check_health=True):
            first = command if isinstance(command, bytes) else b"".join(command[:2])
            name = first.split(b"\r\n")[2].upper() if first.startswith(b"*") else b""
            if name in HANDSHAKE:
                self.connects += 1
            else:
                self.count += 1
            return original(conn, command, check_health)

        self.monkeypatch = monkeypatch
        self.counted = counted

    def get(self, client, path):
        with self.monkeypatch.context() as patch:
            patch.setattr(redis.connection.AbstractConnection, "send_packed_command", self.counted)
            response = client.get(path)
        return response


# --- what the page shows ------------------------------------------------------------------------------


def test_the_job_page_shows_payload_meta_attempts_exception_and_trace_escaped(client, queue_redis):
    job = failed_five_times(queue_redis, args=("<script>alert(1)</script>", "x" * 5000), kwargs={"seller": 7})
    job.meta["progress"] = {"step": 2, "of": 4}
    job.save_meta()
    html = page(client, job.id)
    assert re.search(r'<span id="job-state" class="rq-pill job-state-failed">failed</span>', html)
    assert '<td class="job-mono job-wrap" id="job-func">tests.jobs.sample.add</td>' in html
    args = re.findall(r'<code class="job-arg">(.*?)</code>', html, re.S)
    assert html_lib.unescape(args[0]) == '"<script>alert(1)</script>"'  # JSON text, escaped
    assert "<script>alert(1)" not in html
    assert len(args[1]) < 2_200 and "truncated" in args[1]  # a long value is cut, saying so
    assert html_lib.unescape(args[2]) == "7"  # kwargs: seller: 7
    meta = re.search(r'<pre class="rq-pre job-meta">(.*?)</pre>', html, re.S).group(1)
    assert '"dead": "exhausted"' in html_lib.unescape(meta)
    assert 'id="job-progress"' in html
    assert '<td class="job-mono" id="job-trace-id">0af7651916cd43dd8448eb211c80319c</td>' in html
    attempts = re.findall(r'<tr id="result-([0-9-]+)" class="job-attempt">(.*?)</tr>', html, re.S)
    assert len(attempts) == 5
    assert [re.search(r"RuntimeError: (attempt \d)", row).group(1) for _, row in attempts] == [
        f"attempt {n}" for n in (5, 4, 3, 2, 1)
    ]  # newest first
    exception = re.search(r'<div class="module job-box" id="job-exception">(.*?)</div>', html, re.S).group(1)
    assert "RuntimeError: attempt 5" in exception  # the latest attempt's error


def test_the_result_url_redirects_to_the_attempt_on_the_job_page_or_answers_404(client, queue_redis):
    job = failed_five_times(queue_redis)
    result_id = job.latest_result().id
    response = client.get(url(job.id, f"results/{result_id}/"))
    assert (response.status_code, response["Location"]) == (302, f"{url(job.id)}#result-{result_id}")
    assert client.get(url(job.id, "results/1-0/")).status_code == 404  # no such result
    assert client.get(url(job.id, "results/not-a-stream-id/")).status_code == 404


def test_dependencies_and_dependents_are_listed_with_their_function_at_most_20(client, queue_redis):
    job = finished_job()
    other = finished_job(func="tests.jobs.sample.add", args=(1, 1))
    dependents = [f"dependent-{i:03}" for i in range(30)]
    queue_redis.sadd(Job.dependents_key_for(job.id), *dependents)
    queue_redis.sadd(f"{job.key}:dependencies", other.id, "gone-job")
    html = page(client, job.id)
    box = re.search(r'id="job-dependencies">(.*?)</table>', html, re.S).group(1)
    assert f'<a href="{url(other.id)}">{other.id}</a>' in box and "tests.jobs.sample.add" in box
    assert "Deleted" in box  # gone-job
    box = re.search(r'id="job-dependents">(.*?)</table>', html, re.S).group(1)
    assert box.count("<tr><td><a href=") == 20 and "and 10 more" in box


def test_a_viewer_sees_no_action_an_operator_the_ones_of_the_jobs_state(viewer, django_user_model, queue_redis):
    client = Client()
    client.force_login(make_staff(django_user_model, "operator", "queues.act_on_queue_panel"))
    failed, _ = dead_job("default", row=False)
    html = page(viewer, failed.id)
    assert 'id="job-actions"' not in html and "/delete/" not in html and "/requeue/" not in html
    html = page(client, failed.id)
    assert f'action="{url(failed.id, "requeue/")}"' in html  # Requeue: a form
    assert f'href="{url(failed.id, "delete/")}"' in html
    assert "/enqueue/" not in html and "/stop/" not in html and "/cancel/" not in html
    queued = queues.enqueue("default", JOB, 1, 2)
    html = page(client, queued.id)
    assert f'href="{url(queued.id, "cancel/")}"' in html
    assert "/enqueue/" not in html and "/requeue/" not in html


# --- the one-job actions ----------------------------------------------------------------------------


def test_delete_asks_then_deletes_audits_and_discards_the_dead_letter(client, queue_redis):
    job, row = dead_job("default")
    html = page(client, f"{job.id}/delete")
    assert "Are you sure you want to <b>Delete</b> job" in html and 'value="Yes, delete it"' in html
    assert queue_redis.exists(job.key) == 1 and audit_rows() == []
    response = client.post(url(job.id, "delete/"), follow=True)
    assert response.redirect_chain == [(f"/admin/queues/queues/{DEFAULT}/", 302)]
    assert [str(m) for m in response.context["messages"]] == [f"You have successfully deleted {job.id}"]
    assert queue_redis.exists(job.key, Result.get_key(job.id)) == 0
    assert audit_rows() == [("delete", [job.id], "ok")]
    row.refresh_from_db()
    assert row.status == DeadLetter.Status.DISCARDED


def test_refused_actions_change_nothing_and_are_audited_as_errors(client, queue_redis):
    queued = queues.enqueue("default", JOB, 1, 2)
    done = finished_job()
    for job, action, said in (
        (done, "requeue", "requeued: it is not in the failed jobs of default (it is finished)"),
        (queued, "enqueue", "enqueued: it is queued already"),
        (done, "stop", "stopped: the job is not running"),
    ):
        response = client.post(url(job.id, f"{action}/"), follow=True)
        assert response.redirect_chain == [(url(job.id), 302)]
        assert [str(m) for m in response.context["messages"]] == [f"Job {job.id} not {said}."]
    assert get_queue("default").get_job_ids() == [queued.id]
    assert OptimaJob.fetch(done.id, connection=queue_redis).get_status(refresh=True) == JobStatus.FINISHED
    assert audit_rows() == [
        ("requeue", [done.id], "error"),
        ("enqueue", [queued.id], "error"),
        ("stop", [done.id], "error"),
    ]


def test_requeue_of_a_failed_job_puts_it_back_and_marks_its_row_retried(client, queue_redis):
    job, row = dead_job("default")
    response = client.post(url(job.id, "requeue/"), follow=True)
    assert response.redirect_chain == [(url(job.id), 302)]
    assert get_queue("default").get_job_ids() == [job.id]
    assert audit_rows() == [("requeue", [job.id], "ok")]
    row.refresh_from_db()
    assert (row.status, row.retried_as) == ("retried", job.id)


def test_the_actions_need_the_act_permission(viewer, queue_redis):
    job, _ = dead_job("default", row=False)
    for action in ("delete", "requeue", "enqueue", "stop"):
        assert viewer.get(url(job.id, f"{action}/")).status_code == 403
        assert viewer.post(url(job.id, f"{action}/")).status_code == 403
    assert queue_redis.exists(job.key) == 1 and audit_rows() == []


# --- round trips ------------------------------------------------------------------------------------


def test_the_job_page_costs_at_most_5_round_trips_whatever_the_job_holds(client, queue_redis, monkeypatch):
    job = failed_five_times(queue_redis)
    queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    held = queues.enqueue("default", JOB, 2, limit_key="seller:1", limit_concurrency=1)
    dependents = [finished_job().id for _ in range(100)]
    queue_redis.sadd(Job.dependents_key_for(job.id), *dependents)
    queue_redis.sadd(f"{job.key}:dependencies", *dependents[:50])
    sends = Sends(monkeypatch)
    response = sends.get(client, url(job.id))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="job-attempt"') == 5 and 'id="job-dependents"' in html
    assert sends.count <= 5, f"the job page sent {sends.count} round trips to Redis"
    plain = sends.count
    response = sends.get(client, url(held.id))
    assert response.status_code == 200 and 'id="job-limit"' in response.content.decode()
    assert sends.count - plain <= 5, f"the held job's page sent {sends.count - plain} round trips to Redis"
    before = sends.count
    assert sends.get(client, url(job.id, f"results/{job.latest_result().id}/")).status_code == 302
    assert sends.count - before <= 5


def test_a_chain_steps_job_page_costs_at_most_5_round_trips_whatever_the_chain_holds(client, monkeypatch, tmp_path):
    record = str(tmp_path / "chain-runs.txt")
    first = queues.group(*[queues.call("default", "tests.jobs.batches.add", record, n) for n in range(12)])
    later = [queues.call("default", "tests.jobs.batches.add", record, n) for n in range(8)]
    chain = queues.chain(first, *later, description="a chain of nine steps")
    step = queues.chain_state(chain.id).steps[0]
    assert len(step.job_ids) == 12
    sends = Sends(monkeypatch)
    response = sends.get(client, url(step.job_ids[0]))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count("<tr data-step=") == 9 and 'id="job-chain-state">running<' in html
    waiting = re.findall(r'class="chain-step-waiting">(.*?)</td>', html, re.S)
    assert len(waiting) == 9 and all(w.count("(queued)") == 12 for w in waiting[1:]), waiting
    assert sends.count <= 5, f"the chain step's job page sent {sends.count} round trips to Redis"
