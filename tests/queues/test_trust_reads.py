"""No Redis entry stops a page, the job API, /metrics or /healthz (issue 19, findings 3 and 4).

Entries planted by someone who can write to the queues' Redis: job ids rq rejects (anything outside
``[A-Za-z0-9_-]``), history samples that overflow a float, results streams that are not
base64/zlib/JSON, registries and worker sets of the wrong type, 50 MB values. Each is read as a
corrupt job or a bad entry (reported once, skipped), never a 500 or a 503 that blames Redis; what
is stored from them is bounded.
"""
import time

import pytest
from django.urls import reverse
from rq.job import JobStatus

from queues import keys
from queues.catalog.lookup import get_queue
from queues.jobs import read as jobread
from tests.queues.test_no_pickle import DEFAULT, operator, panel_urls  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

REJECTED_IDS = ("r2.dot.id", "../../x", "a/b", "a:b", "back\\slash", "line\nbreak", "sp ace", "é-accent")
PLACES = ("queued", "started", "finished", "failed", "scheduled", "deferred", "canceled")


def good_hash(connection, origin="default"):
    """The raw hash of a valid JSON job (written under a valid id, read back, deleted)."""
    job = get_queue("default").create_job("tests.jobs.sample.add", args=[1, 2], meta={"queue": "default"})
    job.origin = origin
    job._status = JobStatus.FAILED
    job.save()
    raw = connection.hgetall(job.key)
    connection.delete(job.key)
    return raw


def place(connection, job_id, where, queue="default"):
    future = time.time() + 3600
    q = get_queue(queue)
    if where == "queued":
        connection.rpush(q.key, job_id)
        return
    if where == "started":
        connection.zadd(keys.started_key(queue), {f"{job_id}:exec1": future})
        return
    registry = {"finished": q.finished_job_registry, "failed": q.failed_job_registry,
                "scheduled": q.scheduled_job_registry, "deferred": q.deferred_job_registry,
                "canceled": q.canceled_job_registry}[where]
    connection.zadd(registry.key, {job_id: future if where == "scheduled" else "+inf"})


def plant_rejected_id(connection, job_id, places=PLACES):
    connection.hset(keys.job_key(job_id), mapping=good_hash(connection))
    for where in places:
        place(connection, job_id, where)


# --- finding 3: job ids rq rejects -----------------------------------------------------------------

@pytest.mark.parametrize("job_id", REJECTED_IDS)
def test_a_job_id_rq_rejects_reads_as_a_corrupt_job_never_a_value_error(queue_redis, job_id):
    plant_rejected_id(queue_redis, job_id, places=())
    job = jobread.fetch(job_id, queue_redis)
    assert (jobread.is_corrupt(job), job.kind) == (True, "id")
    assert "id" in job.why and job.raw_id == job_id and "/" not in job.id
    assert jobread.fetch_many([job_id, "absent"], queue_redis)[1] is None


def test_every_panel_page_stats_find_and_the_job_api_answer_without_500_for_rejected_ids(operator, queue_redis):
    for job_id in REJECTED_IDS:
        plant_rejected_id(queue_redis, job_id)
    sample = {"queue_index": DEFAULT, "scheduler_index": DEFAULT, "connection_index": 0, "job_id": "r2.dot.id",
              "result_id": "1-0", "key": "rq:worker:none", "scheduler_name": "s1", "cron_job_name": "c1",
              "token": "t", "name": "default"}
    urls = panel_urls(sample) + [f"{reverse('django_rq:queues_find')}?job_id={j}" for j in ("r2.dot.id", "a/b")]
    urls += [reverse("django_rq:job_detail", args=[DEFAULT, jobread.shown_id(j)]) for j in REJECTED_IDS]
    urls += ["/jobs/r2.dot.id/", "/metrics", "/healthz"]
    answers = {url: operator.get(url).status_code for url in urls}
    assert {url: status for url, status in answers.items() if status >= 500} == {}
    failed_page = operator.get(reverse("django_rq:failed_jobs", args=[DEFAULT])).content.decode()
    assert "r2.dot.id" in failed_page and "corrupt: " in failed_page
    # The job API refuses such an id before reading Redis (its own id check).
    assert operator.get("/jobs/r2.dot.id/").status_code == 404
    detail = operator.get(reverse("django_rq:job_detail", args=[DEFAULT, jobread.shown_id("../../x")]))
    assert (detail.status_code, "corrupt" in detail.content.decode()) == (200, True)
