"""Poison entries in the queues' Redis never stop anything (issue 10, item 3).

Someone with write access to Redis plants entries rq cannot read: garbage ``data``, a hash without
``data``, a pickled ``meta`` or ``result``, bytes that are not UTF-8 (in a field, or in the job id
itself), a job of an undeclared queue, a registry entry whose hash is gone, a job key that is a
string; and container keys of the wrong type. Every operator surface skips them or shows them as
corrupt, never answers 500, and bulk actions process the other jobs and report the corrupt ones.
"""

import pickle
import time

import pytest
from django.urls import reverse
from rq.job import JobStatus

from queues import conf
from queues.catalog.lookup import get_queue
from queues.failures import deadletter
from queues.jobs import read as jobread
from queues.keyspace import keys
from queues.models import AuditEntry, DeadLetter
from tests.support.panel import dead_job, good_hash, place
from tests.support.pickles import DEFAULT, panel_urls

pytestmark = pytest.mark.django_db

KINDS = (
    "garbage_data",
    "no_data",
    "pickled_meta",
    "pickled_result",
    "non_utf8_field",
    "non_utf8_id",
    "undeclared_origin",
    "hash_gone",
    "wrong_type_job",
)
HAS_HASH = set(KINDS) - {"hash_gone"}
PLACES = ("queued", "started", "finished", "failed", "scheduled", "deferred", "canceled")


def plant(connection, kind, job_id):
    """Write one poison job of ``kind`` under ``job_id`` (str); returns the id as Redis holds it."""
    rid = job_id.encode() + b"-\xff" if kind == "non_utf8_id" else job_id
    key = jobread.job_key(rid)
    raw = good_hash(connection, job_id, origin="ghost" if kind == "undeclared_origin" else "default")
    if kind == "garbage_data":
        raw[b"data"] = b"\x00\x01 not zlib, not json"
    elif kind == "no_data":
        raw.pop(b"data")
    elif kind == "pickled_meta":
        raw[b"meta"] = pickle.dumps({"x": 1})
    elif kind == "pickled_result":
        raw[b"result"] = pickle.dumps(42)
    elif kind == "non_utf8_field":
        raw[b"description"] = b"<b>\xfe\xff</b>"
    if kind == "wrong_type_job":
        connection.set(key, b"i am a string")
    elif kind != "hash_gone":
        connection.hset(key, mapping=raw)
    return rid


def _shown(rid):
    return jobread.text(rid)


def _messages(response):
    return [str(m) for m in response.context["messages"]]


# --- every page, every poison ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_no_panel_page_metrics_healthz_or_job_api_answers_500_for_a_poison_job(operator, queue_redis, kind):
    ids = {}
    for where in PLACES:
        ids[where] = plant(queue_redis, kind, f"poison-{where}")
        place(queue_redis, ids[where], where)
    good, _ = dead_job("default")
    sample = {
        "queue_index": DEFAULT,
        "scheduler_index": DEFAULT,
        "connection_index": 0,
        "job_id": good.id,
        "result_id": "1-0",
        "key": "rq:worker:none",
        "scheduler_name": "s1",
        "cron_job_name": "c1",
        "token": "t",
        "name": "default",
    }
    urls = panel_urls(sample)
    for rid in ids.values():
        urls += [
            reverse("django_rq:job_detail", args=[DEFAULT, _shown(rid)]),
            reverse("django_rq:result_detail", args=[DEFAULT, _shown(rid), "1-0"]),
            reverse("django_rq:delete_job", args=[DEFAULT, _shown(rid)]),
            reverse("django_rq:requeue_job", args=[DEFAULT, _shown(rid)]),
            f"{reverse('django_rq:queues_find')}?job_id={_shown(rid)}",
            f"/jobs/{_shown(rid)}/",
        ]
    urls += ["/metrics", "/healthz", reverse("admin:queues_deadletter_changelist")]
    answers = {url: operator.get(url).status_code for url in urls}
    assert {url: status for url, status in answers.items() if status >= 500} == {}
    failed_page = operator.get(reverse("django_rq:failed_jobs", args=[DEFAULT])).content.decode()
    assert good.id in failed_page
    if kind in HAS_HASH:
        assert "corrupt: " in failed_page
        assert _shown(ids["failed"]) in failed_page
        detail = operator.get(reverse("django_rq:job_detail", args=[DEFAULT, _shown(ids["failed"])]))
        assert (detail.status_code, "corrupt" in detail.content.decode()) == (200, True)
    assert "\ufffd" not in failed_page  # nothing decoded lossily: escaped
    from queues.metrics.collector import cache

    cache.clear()  # a snapshot of an earlier test may still be fresh (METRICS_CACHE_SECONDS)
    metrics = [line for line in operator.get("/metrics").content.decode().splitlines() if 'queue="default"' in line]
    # The poison ids are counted like any other (one per place, the good failed job too); no scrape error.
    assert [line for line in metrics if "queue_jobs{" in line and "failed" in line] == [
        'optima_queue_jobs{queue="default",state="failed"} 2.0'
    ]
    assert 'optima_queue_scrape_error{queue="default",source="redis"} 0.0' in metrics


@pytest.mark.parametrize("kind", sorted(HAS_HASH - {"non_utf8_id"}))
def test_job_api_answers_staff_that_the_job_is_corrupt(operator, queue_redis, kind):
    plant(queue_redis, kind, "poison-api")
    response = operator.get("/jobs/poison-api/")
    # A job of an undeclared queue is readable: its status is harmless to show.
    expected = "failed" if kind == "undeclared_origin" else "corrupt"
    assert (response.status_code, response.json()["state"]) == (200, expected)


def test_job_api_hides_a_corrupt_job_from_whoever_cannot_be_shown_to_own_it(client, settings, queue_redis):
    settings.OPTIMA_ENV = "dev"
    plant(queue_redis, "garbage_data", "poison-api")
    # A corrupt job has no readable owner (features/api.py status_of): the dev API's anonymous owner gets the very
    # 404 of a job that never existed.
    response = client.get("/jobs/poison-api/")
    never = client.get("/jobs/never-enqueued/")
    assert (response.status_code, response.json()) == (
        404,
        {"detail": "No job 'poison-api' (never enqueued, or expired)."},
    )
    assert never.json() == {"detail": "No job 'never-enqueued' (never enqueued, or expired)."}


def test_find_shows_a_corrupt_job_as_such(operator, queue_redis):
    rid = plant(queue_redis, "garbage_data", "poison-find")
    place(queue_redis, rid, "failed")
    page = operator.get(f"{reverse('django_rq:queues_find')}?job_id=poison-find").content.decode()
    assert "corrupt: data is not a JSON job payload" in page


# --- bulk actions through the panel's real POST endpoints ------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_requeue_all_requeues_the_good_jobs_and_reports_the_corrupt_one(operator, queue_redis, kind):
    (a, row_a), (b, _) = dead_job("default"), dead_job("default")
    rid = plant(queue_redis, kind, "poison")
    place(queue_redis, rid, "failed")
    response = operator.post(reverse("django_rq:requeue_all", args=[DEFAULT]), follow=True)
    assert response.status_code == 200
    assert sorted(get_queue("default").get_job_ids()) == sorted([a.id, b.id])
    text = " ".join(_messages(response))
    if kind in HAS_HASH:
        assert "requeued 2 jobs" in text and "1 corrupt skipped" in text
        assert queue_redis.zscore(keys.failed_key("default"), rid) is not None  # left for an operator
    row_a.refresh_from_db()
    assert row_a.status == "retried"


@pytest.mark.parametrize("kind", KINDS)
def test_delete_all_deletes_the_good_jobs_and_the_corrupt_ones_keys(operator, queue_redis, kind):
    (a, _), (b, _) = dead_job("default"), dead_job("default")
    rid = plant(queue_redis, kind, "poison")
    place(queue_redis, rid, "failed")
    response = operator.post(reverse("django_rq:delete_failed_jobs", args=[DEFAULT]), follow=True)
    assert response.status_code == 200
    assert queue_redis.exists(a.key, b.key, jobread.job_key(rid)) == 0
    assert queue_redis.zcard(keys.failed_key("default")) == 0
    if kind in HAS_HASH:
        assert "1 corrupt" in " ".join(_messages(response))


@pytest.mark.parametrize("kind", sorted(HAS_HASH))
@pytest.mark.parametrize("action", ["requeue", "delete"])
def test_bulk_action_processes_the_good_jobs_and_reports_the_corrupt_one(operator, queue_redis, kind, action):
    (a, _), (b, _) = dead_job("default"), dead_job("default")
    rid = plant(queue_redis, kind, "poison")
    place(queue_redis, rid, "failed")
    response = operator.post(
        reverse("django_rq:actions", args=[DEFAULT]),
        {"action": action, "job_ids": [a.id, _shown(rid), b.id]},
        follow=True,
    )
    assert response.status_code == 200
    text = " ".join(_messages(response))
    if action == "requeue":
        assert sorted(get_queue("default").get_job_ids()) == sorted([a.id, b.id])
        assert "Requeued 2 jobs." in text and "corrupt" in text
        assert queue_redis.exists(jobread.job_key(rid)) == 1
    else:
        assert queue_redis.exists(a.key, b.key, jobread.job_key(rid)) == 0
        assert queue_redis.zscore(keys.failed_key("default"), rid) is None
        assert "Deleted 3 jobs." in text
    outcomes = list(AuditEntry.objects.order_by("id").values_list("outcome", flat=True))
    assert outcomes == (["ok", "error", "ok"] if action == "requeue" else ["ok", "ok", "ok"])


@pytest.mark.parametrize("kind", sorted(HAS_HASH))
def test_delete_and_requeue_of_one_corrupt_job_from_its_page(operator, queue_redis, kind):
    rid = plant(queue_redis, kind, "poison")
    place(queue_redis, rid, "failed")
    requeue = operator.post(reverse("django_rq:requeue_job", args=[DEFAULT, _shown(rid)]), follow=True)
    assert requeue.status_code == 200
    assert "not requeued" in " ".join(_messages(requeue))
    assert get_queue("default").get_job_ids() == []
    delete = operator.post(reverse("django_rq:delete_job", args=[DEFAULT, _shown(rid)]), follow=True)
    assert delete.status_code == 200
    assert queue_redis.exists(jobread.job_key(rid)) == 0
    assert queue_redis.zscore(keys.failed_key("default"), rid) is None


@pytest.mark.parametrize("kind", KINDS)
def test_empty_queue_removes_good_and_poison_ids(operator, queue_redis, kind):
    queue = get_queue("default")
    good = queue.create_job("tests.jobs.sample.add", args=[1, 2])
    good.save()
    queue_redis.rpush(queue.key, good.id)
    place(queue_redis, plant(queue_redis, kind, "poison"), "queued")
    response = operator.post(reverse("django_rq:clear", args=[DEFAULT]), follow=True)
    assert response.status_code == 200
    assert queue_redis.llen(queue.key) == 0


# --- reconcile and the abandoned-job scan -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_reconcile_mirrors_the_others_and_buries_an_unreadable_hash_as_corrupt(queue_redis, kind, caplog):
    a, _ = dead_job("default", row=False)
    rid = plant(queue_redis, kind, "poison")
    place(queue_redis, rid, "failed")
    b, _ = dead_job("default", row=False)
    summary = deadletter.reconcile()
    rows = dict(DeadLetter.objects.values_list("job_id", "reason"))
    assert rows[a.id] == rows[b.id] == "exhausted"
    if kind in ("garbage_data", "pickled_meta", "pickled_result", "non_utf8_field"):
        assert rows["poison"] == deadletter.CORRUPT
        row = DeadLetter.objects.get(job_id="poison")
        assert dict(deadletter.decode_raw_hash(row.raw_hash)) == queue_redis.hgetall(jobread.job_key(rid))
    elif kind == "undeclared_origin":
        assert rows["poison"] == "unverified"  # readable, but planted without a signature (issue 19)
    else:
        assert "poison" not in rows
    if kind in ("no_data", "wrong_type_job", "non_utf8_id"):
        assert any(r.levelname == "ERROR" and "poison" in r.getMessage() for r in caplog.records)
    assert summary.errors == 0


def test_reconcile_keeps_the_open_row_of_a_job_whose_hash_is_gone_open_held_only_in_the_database(queue_redis):
    job, row = dead_job("default")
    queue_redis.delete(job.key)
    place(queue_redis, plant(queue_redis, "wrong_type_job", "poison"), "failed")
    deadletter.reconcile()
    row.refresh_from_db()
    assert (row.status, row.only_in_database_since is not None) == ("open", True)  # issue 32: only an operator discards


@pytest.mark.parametrize("kind", KINDS)
def test_abandoned_scan_handles_the_others_and_never_raises_for_a_poison_entry(queue_redis, kind):
    from queues.worker.abandoned import Scan

    queue = get_queue("default")
    good = queue.create_job("tests.jobs.sample.add", args=[1, 2], meta={"queue": "default"})
    good._status = JobStatus.QUEUED
    good.save()
    queue_redis.zadd(keys.started_key("default"), {f"{good.id}:e1": time.time() + 3600})
    rid = plant(queue_redis, kind, "poison")
    place(queue_redis, rid, "started")
    queue_redis.rpush(keys.intermediate_key(queue.key), rid)
    counts = Scan(queue_redis, ["default"], stale_after=0).run()
    assert counts["requeued"] >= 1
    assert good.id in queue.get_job_ids()


# --- container keys of the wrong type ---------------------------------------------------------------


def test_container_keys_of_the_wrong_type_answer_no_500_anywhere(operator, queue_redis):
    from queues.worker.abandoned import Scan

    queue = get_queue("default")
    queue_redis.hset(queue.key, "x", "y")  # the queue list is a hash
    queue_redis.rpush(keys.failed_key("default"), "x")  # a registry is a list
    queue_redis.rpush(keys.started_key("default"), "x")
    queue_redis.rpush(keys.finished_key("default"), "x")
    queue_redis.hset(keys.intermediate_key(queue.key), "x", "y")
    good, _ = dead_job("orders-sync")
    sample = {
        "queue_index": DEFAULT,
        "scheduler_index": DEFAULT,
        "connection_index": 0,
        "job_id": good.id,
        "result_id": "1-0",
        "key": "rq:worker:none",
        "scheduler_name": "s1",
        "cron_job_name": "c1",
        "token": "t",
        "name": "default",
    }
    urls = panel_urls(sample) + ["/metrics", "/healthz"]
    answers = {url: operator.get(url).status_code for url in urls}
    assert {url: status for url, status in answers.items() if status >= 500} == {}
    for name in ("requeue_all", "delete_failed_jobs", "clear"):
        assert operator.post(reverse(f"django_rq:{name}", args=[DEFAULT]), follow=True).status_code == 200
    summary = deadletter.reconcile()
    assert DeadLetter.objects.filter(job_id=good.id).exists()
    assert summary.errors == 0
    Scan(queue_redis, ["default", "orders-sync"], stale_after=0).run()


# --- the dead-letter admin --------------------------------------------------------------------------


def _corrupt_row(connection):
    rid = plant(connection, "non_utf8_field", "poison")
    connection.hset(jobread.job_key(rid), b"<script>alert(1)</script>", b"\x80\x81<img src=x>")
    fields = connection.hgetall(jobread.job_key(rid))
    return deadletter.bury_corrupt(connection, "poison", "default", fields, "field 'description' is not UTF-8")


def test_deadletter_change_page_of_a_corrupt_row_shows_the_raw_hash_escaped(operator, queue_redis):
    row = _corrupt_row(queue_redis)
    response = operator.get(reverse("admin:queues_deadletter_change", args=[row.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)</script>" not in page
    assert "\\x80\\x81&lt;img src=x&gt;" in page
    assert "&lt;b&gt;\\xfe\\xff&lt;/b&gt;" in page
    changelist = operator.get(reverse("admin:queues_deadletter_changelist"))
    assert changelist.status_code == 200 and "poison" in changelist.content.decode()


def test_retry_of_a_corrupt_dead_letter_is_refused_and_discard_deletes_it_from_redis(operator, queue_redis):
    row = _corrupt_row(queue_redis)
    retry = operator.post(reverse("admin:queues_deadletter_retry", args=[row.pk]), follow=True)
    assert retry.status_code == 200
    assert any("nothing to run" in m for m in _messages(retry))
    row.refresh_from_db()
    assert row.status == "open"
    assert get_queue("default").get_job_ids() == []
    discard = operator.post(reverse("admin:queues_deadletter_discard", args=[row.pk]), follow=True)
    assert discard.status_code == 200
    row.refresh_from_db()
    assert row.status == "discarded"
    assert queue_redis.exists(jobread.job_key("poison")) == 0
    assert queue_redis.zscore(keys.failed_key("default"), "poison") is None


def test_a_corrupt_row_needs_no_job_in_redis_to_be_shown(operator, queue_redis):
    row = _corrupt_row(queue_redis)
    queue_redis.delete(jobread.job_key("poison"))
    page = operator.get(reverse("admin:queues_deadletter_change", args=[row.pk]))
    assert (page.status_code, "no longer in Redis" in page.content.decode()) == (200, True)
    assert DeadLetter.objects.filter(prefix=conf.prefix(), reason="corrupt").count() == 1
