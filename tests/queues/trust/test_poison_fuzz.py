"""The poison harness (issue 19, "What to build" item 2): no Redis entry stops a process or a page.

Every key family of ``queues/keyspace/keys.py`` x every corruption kind (``poison_matrix.PLANTERS``:
wrong types, bytes that are not UTF-8, ids rq rejects, ``:`` ``/`` and line breaks in ids, numbers
that overflow or are NaN, payloads that are not base64/zlib/JSON, negative and absurd scores, 5 MB
values) is planted into one Redis state, with traps (unsigned jobs that would create a file if they
ran) and one good job queued behind. Then each process runs once, for real: ``queues_relay`` (a row
of the outbox waits for a queue whose list is of the wrong type), ``queues_reconcile``,
``rqscheduler --burst`` and a burst ``rqworker`` with RQ's scheduler; then, in this process as a
superuser, every panel URL (of a queue with bad members and of one with keys of the wrong type),
every admin page of the app (each changelist and each row's pages), every endpoint of the feature
API (its POSTs with valid bodies, ``/jobs/<id>/`` GET and DELETE), ``/metrics``, ``/healthz``, and
the workers' abandoned-job scan once (a burst worker ends before its first).

Asserted: no process exits non-zero, no response is a 5xx or larger than ``PAGE_BUDGET``, no trap
file exists, no process wrote a line a job id chose, the good job finished, and each planted entry
is accounted for: an ERROR line (a process's output, or this process's log) names it, its key was
renamed aside, it is a dead letter, a page shows it corrupt, or (``Planted.allowed``) it did what a
writer to Redis can still do. A failure names the family and the kind; ``HARNESS_SHOW=1`` (with
``-s``) prints how each entry was accounted for.

The whole matrix is ``slow`` and ``harness`` (CI's SQLite pass only); ``SAMPLE`` runs in-process,
with the pages and reconcile only, in the quick subset. Below it, one test per bug the harness found.
"""

import logging
import os
import re

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import queues
from queues import conf
from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import read as jobread
from queues.jobs import signing
from queues.keyspace import entries, keys
from queues.models import AuditEntry, DeadLetter, FailureGroup, OutboxEntry
from queues.producer import outbox
from tests.jobs import sample
from tests.support import poison_matrix as matrix
from tests.support.lifecycle import WORKER_ENV
from tests.support.pickles import DEFAULT, panel_urls

pytestmark = pytest.mark.django_db(transaction=True)

BAD_INDEX = 0  # queue content (matrix.BAD), whose keys are of the wrong type
PAGE_BUDGET = 512 * 1024  # bytes a response may have, whatever Redis holds (5 MB values were planted)
SAMPLE = [
    ("registry: failed", "rejected_id"),
    ("history sample", "overflow"),
    ("results stream", "bad_zlib"),
    ("unique key", "non_utf8"),
    ("job hash: data", "missing"),
]
PROCESSES = [("queues_relay",), ("queues_reconcile",), ("rqscheduler", "--burst"), ("rqworker", "--burst")]


@pytest.fixture
def owner(django_user_model):
    from features.sellers.models import Cabinet, Product

    user = django_user_model.objects.create_superuser("root", password="pw-for-tests-1")
    for cabinet_id in (12, 901, 902, 903, 904, 905):
        Cabinet.objects.create(cabinet_id=cabinet_id, owner=user)
    for product_id in (31, 32):
        Product.objects.create(product_id=product_id, owner=user)
    client = Client(raise_request_exception=False)
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def ctx(owner, queue_redis, tmp_path, settings, lifecycle_schedules):
    settings.OPTIMA_ENV = "prod"
    entries._reported.clear()  # reported once per process: this test must see its own reports
    trap = tmp_path / "trap"
    trap.mkdir()
    return matrix.Context(connection=queue_redis, trap=trap, owner=owner.user.pk)


def outbox_row(queue):
    """A signed job accepted through the outbox and left there for a relay (what ``stage`` writes)."""
    job = get_queue(queue).create_job("tests.jobs.sample.add", args=[4, 5], meta={"queue": queue})
    job.signature = signing.sign(job)
    return OutboxEntry.objects.create(
        prefix=conf.prefix(), queue=queue, job_id=job.id, job=outbox.encode(job.to_dict()), created_at=timezone.now()
    )


# --- what runs against the poisoned Redis ------------------------------------------------------------


def run_processes(start_worker):
    """Each process once, one after the other; -> {name: (exit code, output)}."""
    ran = {}
    for command, *args in PROCESSES:
        process = start_worker(*args, env=WORKER_ENV, command=command)
        code = process.wait(120)
        ran[command] = (code, process.output())
    return ran


def job_urls(job_ids):
    urls = []
    for job_id in job_ids:
        shown = jobread.shown_id(job_id)
        urls += [
            reverse("django_rq:job_detail", args=[DEFAULT, shown]),
            f"{reverse('django_rq:queues_find')}?job_id={shown}",
            f"/jobs/{shown}/",
        ]
    return urls


def admin_urls():
    urls = []
    for model in (DeadLetter, FailureGroup, AuditEntry, OutboxEntry):
        name = model._meta.model_name
        urls.append(reverse(f"admin:queues_{name}_changelist"))
        for pk in model.objects.values_list("pk", flat=True):
            urls.append(reverse(f"admin:queues_{name}_change", args=[pk]))
            if model is DeadLetter:
                urls += [
                    reverse("admin:queues_deadletter_retry", args=[pk]),
                    reverse("admin:queues_deadletter_discard", args=[pk]),
                ]
    return urls


def open_everything(client, planted, good):
    """GET every page, POST every feature endpoint, DELETE the jobs; -> {(method, url): response}."""
    job_ids = [job_id for entry in planted for job_id in entry.job_ids] + [good.id]
    sample_ids = {
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
    urls = panel_urls(sample_ids) + panel_urls(dict(sample_ids, queue_index=BAD_INDEX, scheduler_index=BAD_INDEX))
    answers = {}
    for url in dict.fromkeys(urls + job_urls(job_ids) + ["/metrics", "/healthz"]):
        answers["GET", url] = client.get(url)
    posts = [("/features/orders/sync/", {"cabinet_id": cabinet}) for cabinet in (12, 901, 902, 903, 904, 905)]
    posts += [
        ("/features/repricer/", {"product_id": 31, "price": "19.90", "idempotency_key": "harness-1"}),
        ("/features/content/", {"product_id": 32, "prompt": "red shoes"}),
    ]
    for url, body in posts:
        answers["POST", f"{url} {body}"] = client.post(url, body, content_type="application/json")
    outbox_row("default")  # the outbox's own pages need a row
    for url in admin_urls():
        answers["GET", url] = client.get(url)
    delayed = queues.enqueue(matrix.BAD, sample.add, 1, 1, delay=3600)  # its cancel writes the canceled registry
    for job_id in [*job_ids, delayed.id]:
        url = f"/jobs/{jobread.shown_id(job_id)}/"
        answers["DELETE", url] = client.delete(url)
    return answers


def scan_for_abandoned_jobs(connection):
    """The workers' abandoned-job scan, once, as their liveness thread runs it (a burst worker may end
    before its first): it reads the intermediate lists and what it noted of them."""
    from queues.catalog.lookup import queue_names
    from queues.worker import abandoned

    abandoned.scan_if_due(connection, queue_names(), interval=1, stale_after=60)


# --- what is asserted ---------------------------------------------------------------------------------


def error_lines(outputs, caplog):
    lines = [line for _, output in outputs.values() for line in output.splitlines() if "ERROR" in line]
    return lines + [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def accounted(entry, connection, errors, answers):
    """How ``entry`` was accounted for: "reported", "set aside", "dead letter", "shown corrupt" or
    "allowed"; else why not, starting with "not "."""
    why = entry.required(connection, answers) if entry.required is not None else ""
    if why:
        return f"not as required: {why}"
    if any(mark in line for line in errors for mark in [entry.mark, *entry.marks]):
        return "reported"
    if entry.aside and connection.keys(f"{entry.aside}.corrupt-*"):
        return "set aside"
    if DeadLetter.objects.filter(job_id__contains=entry.mark).exists():
        return "dead letter"
    near = re.compile(f"{entry.mark}.{{0,150}}corrupt|corrupt.{{0,150}}{entry.mark}", re.S)
    if any(method == "GET" and near.search(r.content.decode(errors="replace")) for (method, _), r in answers.items()):
        return "shown corrupt"
    if entry.allowed is not None:
        why = entry.allowed(connection, answers)
        return f"not as allowed: {why}" if why else "allowed"
    return f"not reported, set aside, dead-lettered nor shown corrupt ({', '.join([entry.mark, *entry.marks])})"


def check(planted, answers, connection, errors, trap, good, outputs=None):
    problems = []
    for command, (code, output) in (outputs or {}).items():
        if code != 0:
            problems.append(f"{command} exited {code}:\n{output[-3000:]}")
    problems += [
        f"{method} {url} answered {r.status_code}" for (method, url), r in answers.items() if r.status_code >= 500
    ]
    problems += [
        f"{method} {url} is {len(r.content)} bytes"
        for (method, url), r in answers.items()
        if len(r.content) > PAGE_BUDGET and url != "/metrics"
    ]
    problems += [f"a planted job ran: {path.name}" for path in trap.iterdir()]
    problems += [
        f"{command} wrote a line a job id chose: {line[:200]}"
        for command, (_, output) in (outputs or {}).items()
        for line in output.splitlines()
        if line.startswith(matrix.FORGED)
    ]
    if good is not None:
        fetched = OptimaJob.fetch(good.id, connection=connection)
        if fetched.get_status() != "finished":
            problems.append(f"the good job queued behind is {fetched.get_status()}")
    for entry in planted:
        how = accounted(entry, connection, errors, answers)
        if os.environ.get("HARNESS_SHOW"):
            print(f"{entry.mark} {entry.family} x {entry.kind}: {how}")
        if how.startswith("not "):
            problems.append(f"{entry.family} x {entry.kind}: {how}")
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


@pytest.mark.slow
@pytest.mark.harness
def test_every_poison_of_every_family_in_one_redis_stops_no_process_page_or_endpoint(ctx, owner, start_worker, caplog):
    planted = matrix.plant_all(ctx)
    outbox_row(matrix.BAD)  # relayed onto a queue whose list is of the wrong type
    good = queues.enqueue(matrix.GOOD, sample.add, 2, 3)
    with caplog.at_level(logging.INFO):
        outputs = run_processes(start_worker)
        answers = open_everything(owner, planted, good)
        scan_for_abandoned_jobs(ctx.connection)
    check(planted, answers, ctx.connection, error_lines(outputs, caplog), ctx.trap, good, outputs)
    assert OutboxEntry.objects.filter(queue=matrix.BAD).count() == 0


def test_a_fixed_sample_of_poisons_stops_no_page_endpoint_or_reconcile(ctx, owner, caplog):
    planted = matrix.plant_all(ctx, SAMPLE)
    with caplog.at_level(logging.INFO):
        call_command("queues_reconcile")
        answers = open_everything(owner, planted, queues.enqueue(matrix.GOOD, sample.add, 2, 3))
    check(planted, answers, ctx.connection, error_lines({}, caplog), ctx.trap, None)


# --- what the harness found: each of these failed before its fix --------------------------------------


def test_a_relay_or_an_enqueue_into_keys_of_the_wrong_type_sets_them_aside_and_writes_the_job(queue_redis):
    queue_redis.hset(keys.queue_key(matrix.BAD), "a hash", "not a list")
    queue_redis.set(keys.scheduled_key(matrix.GOOD), "a string, not a sorted set")
    row = outbox_row(matrix.BAD)
    assert outbox.relay_all() == (1, 0)  # it was (0, 1): "Redis is unavailable (ResponseError)"
    delayed = queues.enqueue(matrix.GOOD, sample.add, 1, 2, delay=60)
    assert queue_redis.lrange(keys.queue_key(matrix.BAD), 0, -1) == [row.job_id.encode()]
    assert queue_redis.zscore(keys.scheduled_key(matrix.GOOD), delayed.id) is not None
    assert [
        len(queue_redis.keys(f"{key}.corrupt-*"))
        for key in (keys.queue_key(matrix.BAD), keys.scheduled_key(matrix.GOOD))
    ] == [1, 1]


def test_periodic_registration_survives_a_member_that_is_not_utf8_and_a_template_rq_cannot_read(
    queue_redis, lifecycle_schedules, caplog
):
    from queues.periodic import plan

    queue_redis.zadd(plan.scheduled_jobs_key(), {b"planted-\xff": 0})
    queue_redis.hset(keys.job_key("schedule-tick"), mapping={"data": b"\x00", "created_at": "99999-01-01T00:00:00Z"})
    queue_redis.sadd(keys.schedules_paused_key(), b"\xff\xfe", "nightly")
    summary = plan.register(queue_redis)
    assert sorted(summary.added + summary.updated) == ["nightly", "tick"]
    assert plan.paused_ids(queue_redis) == {"nightly"}
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 2  # the template, the paused member


def test_the_scheduled_page_shows_a_job_whose_score_is_no_time(owner, queue_redis):
    job = queues.enqueue(matrix.GOOD, sample.add, 1, 2, delay=60)
    queue_redis.zadd(keys.scheduled_key(matrix.GOOD), {job.id: 1e308})
    page = owner.get(reverse("django_rq:scheduled_jobs", args=[DEFAULT]))
    assert (page.status_code, job.id in page.content.decode()) == (200, True)


def test_job_status_answers_null_for_counts_progress_and_results_that_are_no_numbers(owner, queue_redis):
    from tests.support.panel import finished_job

    job = queues.enqueue(matrix.GOOD, sample.add, 1, 2)
    queue_redis.hset(
        job.key, "meta", '{"queue": "default", "attempt": NaN, "attempts_allowed": 1e999, "progress": {"done": NaN}}'
    )
    body = owner.get(f"/jobs/{job.id}/").json()  # JSON has no NaN: this was a 500
    assert (body["attempt"], body["attempts_allowed"], body["progress"]) == (None, None, {"done": None})
    done = finished_job(matrix.GOOD, return_value=float("nan"))
    response = owner.get(f"/jobs/{done.id}/")
    assert (response.status_code, response.json()["result"]) == (200, None)


def test_an_orders_sync_whose_unique_key_is_of_the_wrong_type_is_accepted_and_the_key_reported(
    owner, queue_redis, caplog
):
    key = keys.unique_key("orders-sync", f"owner-{owner.user.pk}.cabinet-12")
    queue_redis.hset(key, "a hash", "not a job id")
    response = owner.post("/features/orders/sync/", {"cabinet_id": 12}, content_type="application/json")
    assert response.status_code == 202  # it was 503, "the queues are unavailable"
    assert queue_redis.get(key) == response.json()["job_id"].encode()
    assert [r.levelno for r in caplog.records if key in r.getMessage()] == [logging.ERROR]


def test_worker_maintenance_moves_a_worker_set_member_that_is_not_utf8_aside_and_cleans_up(queue_redis, caplog):
    from rq.worker_registration import WORKERS_BY_QUEUE_KEY

    from queues.worker.adapter import OptimaWorker

    workers_key = WORKERS_BY_QUEUE_KEY % matrix.GOOD
    queue_redis.sadd(workers_key, b"planted-\xff", keys.worker_key("gone"))
    worker = OptimaWorker([get_queue(matrix.GOOD, connection=queue_redis)], connection=queue_redis)
    worker.run_maintenance_tasks()
    assert [queue_redis.smembers(k) for k in queue_redis.keys(f"{workers_key}.corrupt-*")] == [{b"planted-\xff"}]
    assert queue_redis.smembers(workers_key) == set()  # rq's clean-up ran: the gone worker left the set
    assert "maintenance failed" not in caplog.text


def test_a_job_id_longer_than_200_characters_is_no_job_id_here(owner, queue_redis):
    from queues.failures import deadletter
    from queues.worker.adapter import OptimaWorker

    long_id = "x" * matrix.BIG
    matrix.job(matrix.Context(queue_redis, None, 0), "short", raw_id=long_id, status="failed")
    queue_redis.zadd(keys.failed_key(matrix.GOOD), {long_id: "+inf"})
    queue_redis.rpush(keys.queue_key(matrix.GOOD), long_id)
    job = jobread.fetch(long_id, queue_redis)
    assert (jobread.is_corrupt(job), len(job.id) <= entries.ID_CHARS) == (True, True)
    deadletter.reconcile()
    assert [(row.reason, len(row.job_id) <= entries.ID_CHARS) for row in DeadLetter.objects.all()] == [
        ("corrupt", True)
    ]
    page = owner.get(reverse("django_rq:failed_jobs", args=[DEFAULT]))
    assert (page.status_code, len(page.content) < 64 * 1024) == (200, True)  # it was 15 MB
    worker = OptimaWorker([get_queue(matrix.GOOD, connection=queue_redis)], connection=queue_redis)
    worker.work(burst=True, with_scheduler=False)
    assert queue_redis.llen(keys.queue_key(matrix.GOOD)) == DeadLetter.objects.count() - 1 == 0


def test_the_abandoned_job_scan_goes_on_past_what_it_cannot_read(queue_redis, caplog):
    from queues.catalog.lookup import queue_names
    from queues.worker.abandoned import Scan

    queue_redis.hset(keys.intermediate_seen_key("repricer"), mapping={b"\xff": 1, "job": "not a time"})
    queue_redis.set(keys.intermediate_seen_key(matrix.GOOD), "a string, not a hash")
    Scan(queue_redis, queue_names(), stale_after=60).run()  # it raised UnicodeDecodeError
    assert len(queue_redis.keys(f"{keys.intermediate_seen_key(matrix.GOOD)}.corrupt-*")) == 1
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 3


def test_the_workers_page_leaves_out_a_worker_whose_queue_list_is_huge(owner, queue_redis, settings):
    from tests.support.panel import registered_worker

    settings.QUEUE_BOARD_DEADLINE = 1.5  # production's (the suite's is 10 s): the regression passed this one

    for name in ("planted-1", "planted-2"):
        queue_redis.hset(registered_worker(queue_redis, name), "queues", ",".join(["default"] * (matrix.BIG // 8)))
    page = owner.get(reverse("django_rq:workers", args=[DEFAULT]))
    assert page.status_code == 200  # rq built 650,000 queues for each: the panel's deadline passed (503)


def test_cancel_sets_a_canceled_registry_of_the_wrong_type_aside_and_cancels(queue_redis):
    from rq.registry import CanceledJobRegistry

    from queues.producer.cancel import cancel_job

    job = queues.enqueue(matrix.GOOD, sample.add, 1, 2, delay=3600)
    canceled = CanceledJobRegistry.key_template.format(matrix.GOOD)
    queue_redis.set(canceled, "a string, not a sorted set")
    assert cancel_job(job.id, queue_redis).ok  # it raised WRONGTYPE (the API answered 503)
    assert queue_redis.zscore(canceled, job.id) is not None
    assert len(queue_redis.keys(f"{canceled}.corrupt-*")) == 1


# --- issue 32: a wrong-typed key of each family the enqueue writes ---


def test_a_wrong_typed_key_of_each_family_the_enqueue_writes_leaves_exactly_one_run(
    queue_redis, start_worker, tmp_path
):
    """Every family at once (tests/queues/producer/test_enqueue_trust.py takes them one by one, every
    enqueue path): a single enqueue and a batch of 20 per family, one burst worker, one run each."""
    import datetime as dt
    from pathlib import Path

    from tests.queues.producer.test_enqueue_trust import FAMILIES, FUNC, QUEUE, plant, pushes
    from tests.support import wait_for

    runs, planted = {}, []
    pushed_to = (keys.scheduled_key(QUEUE), *keys.band_keys(keys.queue_key(QUEUE)))
    for family, (key_of, options) in FAMILIES.items():
        for way in ("single", "batch"):
            if key_of() in pushed_to and queue_redis.exists(key_of()):  # a planting would drop the jobs pushed
                queue_redis.rename(key_of(), f"{key_of()}.kept-{len(runs)}")
            plant(queue_redis, key_of())
            planted.append(key_of())
            paths = [str(tmp_path / f"{len(runs) + i}.txt") for i in range(1 if way == "single" else 20)]
            if way == "single":
                jobs = [queues.enqueue(QUEUE, FUNC, paths[0], **options)]
            else:
                jobs = queues.enqueue_many(QUEUE, FUNC, [(p,) for p in paths], **options)
            assert set(pushes(queue_redis, [job.id for job in jobs]).values()) == {1}, f"{family}, {way}"
            runs.update({job.args[0]: f"{family}, {way}" for job in jobs})
    for key in set(planted):  # the pushed jobs back where the planting found them
        for kept in queue_redis.keys(f"{key}.kept-*"):
            if queue_redis.type(kept) == b"list":
                queue_redis.rpush(key, *queue_redis.lrange(kept, 0, -1))
            else:
                queue_redis.zadd(key, dict(queue_redis.zrange(kept, 0, -1, withscores=True)))
            queue_redis.delete(kept)
    assert {key: len(queue_redis.keys(f"{key}.corrupt-*")) for key in set(planted)} == dict.fromkeys(set(planted), 2)
    due = timezone.now() + dt.timedelta(seconds=1.5)  # the delayed ones: the burst worker's scheduler moves them
    wait_for(lambda: timezone.now() > due, message="the delayed jobs to be due")
    worker = start_worker(QUEUE, "--burst")
    assert worker.wait(120) == 0, worker.output()
    counts = {path: Path(path).read_text().count("\n") if Path(path).exists() else 0 for path in runs}
    assert sorted(f"{runs[path]}: {n}" for path, n in counts.items() if n != 1) == []


# --- issue 32: planted search index members ---
def test_ids_planted_in_owner_function_and_queue_sets_are_shown_to_no_one_and_dropped(
    owner, queue_redis, django_user_model, caplog
):
    """``ZADD`` into ``search:owner:<id>``, ``search:func:<f>`` and ``search:queue:<q>`` of jobs that are not
    that owner's (another's, an ownerless staff-only one, an owner that is no id), function's or queue's, and
    of ids that are no job (gone, a key of another type, a meta that is not JSON, bytes that are not UTF-8):
    no search — the API's list and its ``q=``, the panel's Search — shows one where it was planted, and each
    leaves the set it was planted in."""
    import time

    victim, other = (django_user_model.objects.create_user(name, password="pw-for-tests-1") for name in ("v", "o"))
    client = Client(raise_request_exception=False)
    client.force_login(victim)
    mine = queues.enqueue_call(matrix.GOOD, sample.fail, ("victim-own",), meta=queues.owner_meta(victim.pk))
    others = queues.enqueue_call(matrix.GOOD, sample.fail, ("planted-arg",), meta=queues.owner_meta(other.pk))
    staff_only = queues.enqueue(matrix.GOOD, sample.fail, "planted-arg")
    listed_owner = queues.enqueue_call(matrix.GOOD, sample.fail, ("planted-arg",), meta={"owner": [victim.pk]})
    other_function = queues.enqueue(matrix.GOOD, sample.add, 1, 2)
    other_queue = queues.enqueue("repricer", sample.fail, "planted-arg")
    queue_redis.set(keys.job_key("planted-string"), "not a hash")
    queue_redis.hset(keys.job_key("planted-meta"), mapping={"status": "queued", "origin": matrix.GOOD, "meta": "{"})
    noise = ["never-existed", "planted-string", "planted-meta", b"\xff\xfe"]
    planted = {
        keys.search_owner_key(victim.pk): [others.id, staff_only.id, listed_owner.id, *noise],
        keys.search_func_key("tests.jobs.sample.fail"): [other_function.id, "never-existed", "planted-string"],
        keys.search_queue_key(matrix.GOOD): [other_queue.id, "planted-string"],
    }
    for key, members in planted.items():
        queue_redis.zadd(key, {member: time.time() + 60 + i for i, member in enumerate(members)})

    pages = {
        "api list": client.get("/jobs/"),
        "api q": client.get("/jobs/?q=planted-arg"),
        "panel function": owner.get(reverse("django_rq:queues_search"), {"function": "tests.jobs.sample.fail"}),
        "panel queue": owner.get(reverse("django_rq:queues_search"), {"queue": matrix.GOOD, "q": "planted"}),
    }
    assert {name: page.status_code for name, page in pages.items()} == dict.fromkeys(pages, 200)
    assert [r["job_id"] for r in pages["api list"].json()["results"]] == [mine.id]
    assert pages["api q"].json()["results"] == []
    assert other_function.id not in pages["panel function"].content.decode()
    assert other_queue.id not in pages["panel queue"].content.decode()
    left = {key: [m for m in members if queue_redis.zscore(key, m) is not None] for key, members in planted.items()}
    assert left == dict.fromkeys(planted, [])
    warned = " ".join(r.getMessage() for r in caplog.records if r.name == "queues.resilience")
    assert [
        i for i in (others.id, staff_only.id, listed_owner.id, other_function.id, other_queue.id) if i not in warned
    ] == []
    # The real entries stay: each job is still found under its own owner, function and queue.
    assert [h.job_id for h in queues.search_jobs(owner=other.pk).hits] == [others.id]
    assert other_function.id in [h.job_id for h in queues.search_jobs(function="tests.jobs.sample.add").hits]
    assert [h.job_id for h in queues.search_jobs(queue="repricer").hits] == [other_queue.id]


# --- issue 32: replay ---


@pytest.mark.slow
def test_replayed_ids_of_finished_dead_canceled_and_running_jobs_run_no_more_and_each_is_accounted_for(
    queue_redis, start_worker, tmp_path, caplog
):
    """Ids of finished, dead, canceled and running jobs pushed to their queue, twice to its ``:high`` band,
    to another queue's band and into the scheduled registry: RQ's scheduler then a burst worker run; no job
    runs (again), each planted entry is named by one line (a WARNING ``dropped, not run``; a canceled job's
    INFO in its queue), nothing is dead-lettered, and a good job behind runs."""
    from queues.failures.corrupt import CORRUPT
    from queues.jobs import meta as jobmeta
    from queues.periodic.supervision import ResilientRQScheduler
    from queues.producer.cancel import cancel_job

    queue_key = keys.queue_key(matrix.GOOD)
    jobs = {}
    for kind in ("finished", "dead", "canceled", "running"):
        path = tmp_path / kind
        job = queues.enqueue(matrix.GOOD, sample.touch, str(path))
        if kind == "canceled":
            assert cancel_job(job.id, queue_redis).ok  # it leaves its queue
        queue_redis.lrem(queue_key, 0, job.id)
        jobs[kind] = (job, path)
    queue_redis.hset(jobs["finished"][0].key, "status", "finished")
    dead = jobs["dead"][0]
    dead.meta.update(dead="exhausted")
    dead.save_meta()
    queue_redis.hset(dead.key, "status", "failed")
    queue_redis.hset(jobs["running"][0].key, mapping={"status": "started", "worker_name": "w-running"})
    queue_redis.set(keys.alive_key("w-running"), "1", ex=300)

    high = keys.band_key(queue_key, jobmeta.HIGH)
    other = keys.band_key(keys.queue_key("repricer"), jobmeta.HIGH)
    for job, _ in jobs.values():
        queue_redis.rpush(queue_key, job.id)
        queue_redis.rpush(high, job.id, job.id)
        queue_redis.rpush(other, job.id)
        queue_redis.zadd(keys.scheduled_key(matrix.GOOD), {job.id: 0})
    good = tmp_path / "good"
    queues.enqueue(matrix.GOOD, sample.touch, str(good))

    scheduler = ResilientRQScheduler([matrix.GOOD], connection=queue_redis)
    assert scheduler.acquire_locks() == {matrix.GOOD}
    with caplog.at_level(logging.INFO):
        scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()
    outputs = []
    for queue in (matrix.GOOD, "repricer"):
        process = start_worker(queue, "--burst", env=WORKER_ENV)
        assert process.wait(120) == 0, process.output()
        outputs.append(process.output())
    lines = "\n".join(outputs).splitlines() + [r.getMessage() for r in caplog.records]

    assert good.read_text() == "done\n"
    for kind, (job, path) in jobs.items():
        assert not path.exists(), f"the {kind} job ran again"
        named = [line for line in lines if f"Job {job.id} dropped, not run" in line or f"job {job.id} of" in line]
        # queue + 2 x :high + repricer's band + the scheduled registry (a canceled job's INFO for its queue's)
        assert len(named) == 5, (kind, named)
        assert not DeadLetter.objects.filter(job_id=job.id).exists(), kind
    assert not DeadLetter.objects.filter(reason=CORRUPT).exists()
    assert queue_redis.zcard(keys.scheduled_key(matrix.GOOD)) == 0
    for key in (queue_key, high, other, keys.intermediate_key(queue_key)):
        assert queue_redis.llen(key) == 0, key


# --- issue 32: floods (the volume case) ---
from queues.metrics import collector  # noqa: E402 — this section's own import, appended with it

VOLUME = 10_000


def plant_volume(connection, kind):
    """``VOLUME`` bogus ids pushed onto default's high band (one LPUSH per 1,000): "not_a_hash", each id's key a
    string; "no_hash", the review's 200,000 ids on a band, no key at all."""
    band = keys.band_key(keys.queue_key("default"), "high")
    ids = [f"bogus-{kind}-{i}" for i in range(VOLUME)]
    with connection.pipeline(transaction=False) as pipe:
        if kind == "not_a_hash":
            for job_id in ids:
                pipe.set(keys.job_key(job_id), "not a job")
        for start in range(0, VOLUME, 1000):
            pipe.rpush(band, *ids[start : start + 1000])
        pipe.execute()
    return band


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind",
    [
        "not_a_hash",
        "no_hash",
    ],
)
def test_ten_thousand_bogus_ids_on_a_band_are_a_few_lines_and_all_counted(kind, queue_redis, start_worker, client):
    queue_redis.delete(keys.quarantined_key())
    band = plant_volume(queue_redis, kind)
    good = queues.enqueue("default", sample.add, 1, 2)

    worker = start_worker("default", "--burst", env=WORKER_ENV)
    assert worker.wait(300) == 0, worker.output()[-2000:]
    loud = [line for line in worker.output().splitlines() if "ERROR" in line or "WARNING" in line]

    assert queue_redis.llen(band) == 0
    assert jobread.fetch(good.id, queue_redis).get_status() == "finished"
    assert len(loud) <= 4, loud[:10]  # the first drop named, a summary of the 9,999 others; not 10,000 lines
    assert any(f"bogus-{kind}-0" in line for line in loud)
    assert int(queue_redis.hget(keys.quarantined_key(), "dropped") or 0) == VOLUME
    collector.cache.clear()
    metrics = client.get("/metrics").content.decode()
    assert f'optima_quarantined_entries_total{{kind="dropped"}} {float(VOLUME)}' in metrics


# --- issue 32: floods (the future history entry) ---


@pytest.mark.parametrize("ahead", ["1e300", "a day"])
def test_a_history_entry_from_the_future_does_not_freeze_the_72_hour_history(queue_redis, start_worker, ahead):
    import json
    import time

    from queues.metrics import history

    now = time.time()
    planted = json.dumps({"t": 1e300 if ahead == "1e300" else now + 86400, "q": {"default": [0, 0]}})
    queue_redis.lpush(keys.history_coarse_key(), planted)
    queue_redis.set(keys.history_key(), "a string, not a list")

    worker = start_worker("default", "--burst", env=WORKER_ENV)  # its heartbeat takes the minute's sample
    assert worker.wait(60) == 0, worker.output()[-2000:]

    minutes, coarse = history.read_both(queue_redis)
    assert len(minutes) == 1 and now - 5 < minutes[0][0] < time.time() + 5
    assert [t for t, _ in coarse] == [minutes[0][0]]
    assert len(queue_redis.keys(f"{keys.history_coarse_key()}.corrupt-*")) == 1
    assert len(queue_redis.keys(f"{keys.history_key()}.corrupt-*")) == 1
    assert "could not sample" not in worker.output()
