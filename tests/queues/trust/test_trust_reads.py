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

from queues.jobs import read as jobread
from queues.keyspace import keys
from tests.session_env import PREFIX
from tests.support.panel import good_hash, place
from tests.support.pickles import DEFAULT, panel_urls

pytestmark = pytest.mark.django_db

REJECTED_IDS = ("r2.dot.id", "../../x", "a/b", "a:b", "back\\slash", "line\nbreak", "sp ace", "é-accent")
PLACES = ("queued", "started", "finished", "failed", "scheduled", "deferred", "canceled")


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
    sample = {
        "queue_index": DEFAULT,
        "scheduler_index": DEFAULT,
        "connection_index": 0,
        "job_id": "r2.dot.id",
        "result_id": "1-0",
        "key": "rq:worker:none",
        "scheduler_name": "s1",
        "cron_job_name": "c1",
        "token": "t",
        "name": "default",
    }
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


# --- finding 4: other entries that stopped a page ---------------------------------------------------

BIG = 50 * 1024 * 1024  # bytes: a 50 MB value


def plant_history(connection):
    import json

    now = time.time()
    for at, counts in ((now - 170, "[1e999, NaN]"), (now - 110, f"[{10**400}, 1]"), (now - 50, "[3, 1]")):
        connection.lpush(keys.history_key(), f'{{"t": {at!r}, "q": {{"default": {counts}}}}}')
    connection.lpush(
        keys.history_key(),
        json.dumps({"t": "1e999", "q": {}}),
        '{"t": 1e999, "q": {"default": [1, 1]}}',
        '{"t": NaN, "q": {}}',
        b"\xff\xfe not json",
    )


def plant_results(connection):
    """Finished jobs whose results stream holds entries rq cannot restore; returns their ids."""
    from tests.support.panel import finished_job

    bad = {
        "not_base64": {"type": "1", "return_value": "!!! not base64 !!!"},
        "not_json": {"type": "1", "return_value": "bm90IGpzb24="},  # base64 of b"not json"
        "not_zlib": {"type": "2", "exc_string": "bm90IHpsaWI="},
        "bad_type": {"type": "x"},
    }
    ids = {}
    for name, fields in bad.items():
        job = finished_job("default")
        connection.xadd(keys.results_key(job.id), fields)
        ids[name] = job.id
    job = finished_job("default")
    connection.delete(keys.results_key(job.id))
    connection.set(keys.results_key(job.id), "a string, not a stream")
    ids["wrong_type"] = job.id
    return ids


def plant_wrong_types(connection):
    from rq.registry import CanceledJobRegistry, DeferredJobRegistry
    from rq.worker import Worker

    from queues.periodic.schedules import scheduled_jobs_key

    connection.delete(keys.finished_key("default"), keys.scheduled_key("default"))
    connection.set(keys.scheduled_key("default"), "a string, not a zset")
    connection.rpush(keys.finished_key("default"), "a list, not a zset")
    connection.hset(DeferredJobRegistry.key_template.format("default"), "a hash", "not a zset")
    connection.set(CanceledJobRegistry.key_template.format("default"), "a string, not a zset")
    connection.set(scheduled_jobs_key(), "a string, not a zset")
    connection.set(Worker.redis_workers_keys, "poison")
    connection.set(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:default", "poison")


def plant_big(connection):
    """A failed job whose description and meta are 50 MB each; returns its id."""
    from tests.support.panel import dead_job

    job, _ = dead_job("default", row=False)
    connection.hset(
        job.key, mapping={"description": "d" * BIG, "meta": '{"queue": "default", "x": "%s"}' % ("m" * BIG)}
    )
    return job.id


def _answers(operator, job_ids):
    sample = {
        "queue_index": DEFAULT,
        "scheduler_index": DEFAULT,
        "connection_index": 0,
        "job_id": job_ids[0],
        "result_id": "1-0",
        "key": "rq:worker:none",
        "scheduler_name": "s1",
        "cron_job_name": "c1",
        "token": "t",
        "name": "default",
    }
    urls = panel_urls(sample) + [reverse("django_rq:job_detail", args=[DEFAULT, j]) for j in job_ids]
    urls += [f"/jobs/{j}/" for j in job_ids] + [f"{reverse('django_rq:queues_find')}?job_id={j}" for j in job_ids]
    return {url: operator.get(url) for url in urls + ["/metrics", "/healthz"]}


PLANTS = {"history": plant_history, "results": plant_results, "wrong_types": plant_wrong_types, "big": plant_big}


@pytest.mark.parametrize("kind", PLANTS)
def test_no_page_metrics_or_healthz_answers_500_or_503_for_bad_history_results_types_or_sizes(
    operator, queue_redis, kind
):
    from tests.support.panel import dead_job

    # /metrics also carries django-prometheus' per-view series of every request this test session made
    # so far: what the planted entries may add to it is measured from its size before them.
    metrics_before = len(operator.get("/metrics").content)
    planted = PLANTS[kind](queue_redis)
    job_ids = list(planted.values()) if isinstance(planted, dict) else [planted] if planted else []
    job_ids.append(dead_job("default", row=False)[0].id)
    answers = _answers(operator, job_ids)
    assert {url: r.status_code for url, r in answers.items() if r.status_code >= 500} == {}
    sizes = {url: len(r.content) - (metrics_before if url == "/metrics" else 0) for url, r in answers.items()}
    assert {url: size for url, size in sizes.items() if size > 512 * 1024} == {}


def test_a_bad_entry_is_reported_once_with_its_key_escaped(operator, queue_redis, caplog):
    from rq.worker import Worker

    from queues.keyspace import entries

    entries._reported.clear()
    evil = f"{Worker.redis_worker_namespace_prefix}evil\n2026-12-01 13:00:00,000 CRITICAL forged"
    queue_redis.sadd(Worker.redis_workers_keys, evil)
    queue_redis.sadd(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:default", evil)
    queue_redis.set(evil, "a string, not a worker's hash")
    for _ in range(2):
        assert operator.get(reverse("django_rq:workers", args=[DEFAULT])).status_code == 200
        assert operator.get(reverse("django_rq:home")).status_code == 200
    reported = [r.getMessage() for r in caplog.records if r.levelname == "ERROR" and "evil" in r.getMessage()]
    assert len(reported) == 1
    assert "\n" not in reported[0] and "evil\\n2026" in reported[0] and "not a worker's hash" in reported[0]


def test_workers_set_of_the_wrong_type_is_a_bad_entry_not_a_timeout(operator, queue_redis):
    from rq.worker import Worker

    queue_redis.set(Worker.redis_workers_keys, "poison")
    queue_redis.set(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:default", "poison")
    for url in (
        reverse("django_rq:home"),
        reverse("django_rq:workers", args=[DEFAULT]),
        reverse("django_rq:queue_details", args=[DEFAULT]),
        reverse("django_rq:home_json"),
    ):
        response = operator.get(url)
        assert (url, response.status_code, b"did not answer in time" in response.content) == (url, 200, False)


# --- finding 4: /metrics with bad entries -----------------------------------------------------------


def test_metrics_keep_the_true_counts_of_a_queue_whose_counters_durations_or_worker_set_are_bad(
    client, queue_redis, settings
):
    from prometheus_client.parser import text_string_to_metric_families
    from rq.worker import Worker

    from queues.metrics import collector, store

    collector.cache.clear()
    queue_redis.rpush(keys.queue_key("default"), "waiting-job")
    queue_redis.hset(store.counters_key("default"), mapping={"processed": "1e999", "failed": "not a number"})
    queue_redis.rpush(store.durations_key("default"), "nan", "x" * 100, "5")
    queue_redis.set(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:default", "poison")
    queue_redis.hset(store.counters_key("repricer"), mapping={"processed": "4", "failed": "1"})
    response = client.get("/metrics")
    assert response.status_code == 200
    found = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }

    def value(name, **labels):
        return found.get((name, frozenset(labels.items())))

    assert value("optima_queue_jobs", queue="default", state="waiting") == 1.0
    assert value("optima_queue_workers", queue="default") == 0.0
    assert value("optima_queue_jobs_processed_total", queue="default") is None  # unknown, not 0
    assert value("optima_queue_jobs_processed_total", queue="repricer") == 4.0
    assert value("optima_queue_job_duration_ms", queue="default", quantile="0.5") == 5.0
    assert value("optima_queue_scrape_error", queue="default", source="redis") == 0.0


@pytest.mark.parametrize("bad", ["wrong_types", "absurd_score", "rejected_last_id"])
def test_periodic_page_shows_what_it_can_read_and_never_answers_500_or_503(operator, queue_redis, settings, bad):
    from queues.periodic.declare import declared_schedules
    from queues.periodic.schedules import scheduled_jobs_key

    settings.OPTIMA_SCHEDULES = [
        {"id": "tick", "queue": "default", "func": "tests.jobs.sample.add", "args": [1, 2], "interval": 3600}
    ]
    schedule = declared_schedules()[0]
    if bad == "wrong_types":
        queue_redis.set(scheduled_jobs_key(), "a string, not a zset")
        queue_redis.hset(keys.schedule_last_key("tick"), "a hash", "not a job id")
        queue_redis.set(keys.schedules_paused_key(), "a string, not a set")
    elif bad == "absurd_score":
        queue_redis.zadd(scheduled_jobs_key(), {schedule.template_id: float("inf")})
    else:
        queue_redis.set(keys.schedule_last_key("tick"), "../../x")
        queue_redis.hset(keys.job_key("../../x"), mapping=good_hash(queue_redis))
    for url in (
        reverse("django_rq:queues_periodic"),
        reverse("django_rq:scheduler_jobs", args=[DEFAULT]),
        reverse("django_rq:home"),
    ):
        response = operator.get(url)
        assert (url, response.status_code) == (url, 200)
    assert b"tick" in operator.get(reverse("django_rq:queues_periodic")).content


def test_home_and_worker_pages_with_a_paused_set_limit_keys_or_worker_hash_of_the_wrong_type(operator, queue_redis):
    from rq.worker import Worker

    worker_key = f"{Worker.redis_worker_namespace_prefix}planted"
    queue_redis.set(worker_key, "a string, not a worker's hash")
    queue_redis.sadd(Worker.redis_workers_keys, worker_key)
    queue_redis.set(keys.paused_key(), "a string, not a set")
    queue_redis.set(keys.limit_keys_key(), "a string, not a set")
    queue_redis.set(keys.history_key(), "a string, not a list")
    for url, expected in (
        (reverse("django_rq:home"), 200),
        (reverse("django_rq:workers", args=[DEFAULT]), 200),
        (reverse("django_rq:worker_details", args=[DEFAULT, worker_key]), 404),
    ):
        response = operator.get(url)
        assert (url, response.status_code, b"did not answer in time" in response.content) == (url, expected, False)


def test_a_dependents_set_of_the_wrong_type_leaves_the_job_page_readable(operator, queue_redis):
    from rq.job import Job

    from tests.support.panel import dead_job

    job, _ = dead_job("default", row=False)
    queue_redis.set(Job.dependents_key_for(job.id), "a string, not a set")
    page = operator.get(reverse("django_rq:job_detail", args=[DEFAULT, job.id]))
    assert (page.status_code, job.id in page.content.decode()) == (200, True)


def test_a_wrongtype_raised_by_rq_itself_answers_a_page_naming_the_keys_not_a_503(rf, admin_user, queue_redis):
    from queues.board.lookups import known

    queue_redis.set(keys.finished_key("default"), "a string, not a zset")

    def view(request, queue_index):  # stands for rq code reading a key no reader of the panel met
        return queue_redis.zcard(keys.finished_key("default"))

    request = rf.get("/admin/queues/queues/1/finished/")
    request.user = admin_user
    response = known(view)(request, queue_index=DEFAULT)
    page = response.content.decode()
    assert (response.status_code, "wrong type" in page, keys.finished_key("default") in page) == (200, True, True)


# --- item 4: stored sizes are bounded ---------------------------------------------------------------

ROW_BUDGET = 256 * 1024  # characters a dead letter may cost, whatever the job held


def row_size(row):
    import json

    return sum(
        len(v) if isinstance(v, str) else len(json.dumps(v))
        for v in (
            row.func_path,
            row.args,
            row.kwargs,
            row.exc_type,
            row.exc_message,
            row.traceback,
            row.worker,
            row.raw_hash,
            row.carried,
            row.queue,
            row.job_id,
            row.reason,
        )
    )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_16_mib_job_and_a_planted_150_mb_one_cost_kilobytes_in_their_dead_letters_and_admin_pages(
    operator, start_worker, queue_redis
):
    import queues
    from queues.catalog.lookup import OptimaJob
    from queues.failures.deadletter import decode_raw_hash
    from queues.keyspace import entries
    from queues.models import DeadLetter, FailureGroup
    from tests.support import wait_for

    # the largest job a producer writes (queues/jobs/gate.py too_large: 16 MiB); the planted one is 150 MB
    signed = queues.enqueue("default", "tests.jobs.sample.fail", "m" * (entries.RUN_BYTES - 1024), attempts=1)
    planted = OptimaJob.create(
        "tests.jobs.sample.add",
        args=["a" * BIG, 1],
        connection=queue_redis,
        id="planted-big",
        origin="default",
        meta={"queue": "default", "owner": "o" * BIG, "exc_message": "e" * BIG},
    )
    planted.save()
    queue_redis.rpush(keys.queue_key("default"), planted.id)
    worker = start_worker("default", "--burst")
    assert worker.wait(120) == 0, worker.output()
    rows = {
        job_id: wait_for(
            lambda job_id=job_id: DeadLetter.objects.filter(job_id=job_id).first(),
            timeout=30,
            message=f"the dead letter of {job_id}",
        )
        for job_id in (signed.id, planted.id)
    }
    assert (rows[signed.id].reason, rows[planted.id].reason) == ("exhausted", "corrupt")
    assert "too large to run: its hash holds" in rows[planted.id].exc_message
    for row in rows.values():
        assert row_size(row) < ROW_BUDGET
        page = operator.get(reverse("admin:queues_deadletter_change", args=[row.pk]))
        assert (page.status_code, len(page.content) < 2 * ROW_BUDGET) == (200, True)
    assert "truncated" in rows[signed.id].traceback  # its message: jobs/meta.py keeps 2,000 characters
    assert any(b"truncated" in value for _name, value in decode_raw_hash(rows[planted.id].raw_hash))
    assert max(len(g.example_message) + len(g.pattern) for g in FailureGroup.objects.all()) < ROW_BUDGET


def test_a_corrupt_dead_letter_keeps_each_raw_value_capped_inside_valid_json(operator, queue_redis):
    from queues.failures import deadletter
    from queues.keyspace import entries
    from queues.models import DeadLetter

    raw = good_hash(queue_redis)
    raw.update({b"description": b"d" * BIG, b"exc_info": b"m" * 10_000, b"data": b"\x00 not zlib " * 10})
    raw.update({f"extra-{i:03}".encode(): b"x" for i in range(100)})
    queue_redis.hset(keys.job_key("poison-big"), mapping=raw)
    place(queue_redis, "poison-big", "failed")
    deadletter.reconcile()
    row = DeadLetter.objects.get(job_id="poison-big")
    assert row.reason == deadletter.CORRUPT
    assert len(row.raw_hash) < 64 * 1024 and row_size(row) < ROW_BUDGET
    kept = deadletter.decode_raw_hash(row.raw_hash)  # still valid JSON and base64
    assert len(kept) == entries.RAW_FIELDS + 1
    assert kept[-1] == ("…".encode(), f"(truncated: {len(raw) - entries.RAW_FIELDS} more fields not kept)".encode())
    meta = dict(kept)[b"exc_info"]  # sorts among the first 64 names kept
    assert meta.startswith(b"m" * entries.RAW_VALUE_BYTES) and b"truncated" in meta
    assert len(meta) < entries.RAW_VALUE_BYTES + 100
    # 50 MB: Redis has no command that reads the start of a hash's value, and copying it whole into the read's
    # script held the server ~100 ms (queues/jobs/read.py): it is kept as its size
    assert dict(kept)[b"description"] == f"… (truncated: {BIG} bytes in all, the first 0 kept)".encode()
    page = operator.get(reverse("admin:queues_deadletter_change", args=[row.pk]))
    assert (page.status_code, "truncated" in page.content.decode(), len(page.content) < ROW_BUDGET) == (200, True, True)


def test_reconcile_buries_a_failed_job_with_an_id_rq_rejects_and_the_panel_deletes_it(operator, queue_redis):
    from queues.failures import deadletter
    from queues.models import DeadLetter
    from tests.support.panel import dead_job

    plant_rejected_id(queue_redis, "../../x", places=("failed",))
    later, _ = dead_job("repricer", row=False)  # a queue reconciled after "default"
    deadletter.reconcile()
    shown = jobread.shown_id("../../x")
    row = DeadLetter.objects.get(job_id=shown)
    assert (row.reason, row.status) == (deadletter.CORRUPT, "open")
    assert DeadLetter.objects.filter(job_id=later.id).exists()
    assert queue_redis.zrange(keys.failed_key("default"), 0, -1) == [b"../../x"]  # nothing added under another id
    response = operator.post(reverse("django_rq:delete_job", args=[DEFAULT, shown]), follow=True)
    assert response.status_code == 200
    assert queue_redis.exists(keys.job_key("../../x")) == 0 and queue_redis.zcard(keys.failed_key("default")) == 0
    row.refresh_from_db()
    assert row.status == "discarded"


@pytest.mark.django_db(transaction=True)
def test_a_dead_letter_that_kept_only_the_start_of_its_arguments_is_not_rebuilt_from_them(queue_redis):
    """Arguments too large to store are cut in the row; once the job has left Redis, a retry would
    rebuild it from the placeholder: refused, the row stays open, nothing is enqueued."""
    from queues.failures import mirror, operations
    from queues.models import DeadLetter
    from tests.support.panel import dead_job

    job, row = dead_job("default", "tests.jobs.sample.add", (20, 22))
    args, kwargs = mirror.capped_arguments(["x" * (entries_cap() + 10)], {})
    DeadLetter.objects.filter(pk=row.pk).update(args=args, kwargs=kwargs)
    job.delete()
    before = set(queue_redis.keys(f"{PREFIX}:*"))
    outcome = operations.retry_dead_letter(row.pk)
    row.refresh_from_db()
    assert (outcome.outcome, row.status) == ("error", "open")
    assert "kept only the start of its arguments" in outcome.detail
    assert set(queue_redis.keys(f"{PREFIX}:*")) == before


def entries_cap():
    from queues.keyspace import entries

    return entries.ARGS_CHARS


@pytest.mark.django_db
@pytest.mark.parametrize("execution", [{}, {"created_at": "1e400"}, {"created_at": "soon", "last_heartbeat": "1"}])
def test_the_started_list_skips_an_execution_rq_cannot_read_and_shows_the_others(operator, queue_redis, execution):
    from queues.catalog.lookup import get_queue

    queue = get_queue("default")
    broken, fine = (
        queue.enqueue_call("tests.jobs.sample.add", args=(1, 2)),
        queue.enqueue_call("tests.jobs.sample.add", args=(3, 4)),
    )
    now = str(time.time())
    for job, fields in ((broken, execution), (fine, {"created_at": now, "last_heartbeat": now})):
        queue.remove(job.id)
        composite = f"{job.id}:e1"
        queue_redis.zadd(keys.started_key("default"), {composite: 9999999999})
        queue_redis.hset(keys.execution_key(composite), mapping={"worker_name": "w", "job_id": job.id, **fields})
        queue_redis.hset(job.key, "status", "started")
    response = operator.get(reverse("django_rq:started_jobs", args=[DEFAULT]))
    assert response.status_code == 200
    html = response.content.decode()
    assert fine.id in html
