"""The wait (due -> started) and total (first enqueue -> end) histograms: their settings' checks, the
receivers in-process, and a real worker running a delayed job and a retried one."""

import datetime as dt

import pytest
from prometheus_client.parser import text_string_to_metric_families

import queues
from queues.jobs import meta as jobmeta
from queues.metrics import collector, store
from queues.worker import signals as events
from tests.support import wait_for
from tests.support.lifecycle import fetch


@pytest.fixture(autouse=True)
def no_cache(settings):
    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_CACHE_SECONDS": 0}
    collector.cache.clear()
    yield
    collector.cache.clear()


def scraped(client):
    text = client.get("/metrics").content.decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def value(found, name, **labels):
    return found[(name, tuple(sorted(labels.items())))]


def test_bad_wait_and_total_buckets_are_reported_with_their_own_ids(settings):
    from django.core.checks import Error, run_checks

    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_WAIT_BUCKETS": [], "METRICS_TOTAL_BUCKETS": "1,2"}
    errors = [e for e in run_checks() if e.id.startswith("queues.E05")]
    assert [e.id for e in errors] == ["queues.E054", "queues.E055"]
    assert errors[0] == Error(
        "OPTIMA_QUEUES_OPTIONS['METRICS_WAIT_BUCKETS'] must be a non-empty list of distinct positive numbers "
        "of seconds, got [].",
        hint="E.g. [0.1, 1, 10, 60, 600, 3600]; +Inf is added for you. Remove the key for the default.",
        id="queues.E054",
    )
    settings.OPTIMA_QUEUES_OPTIONS = {"METRICS_WAIT_BUCKETS": [1, 60, 3600], "METRICS_TOTAL_BUCKETS": (5, 3600)}
    assert [e for e in run_checks() if e.id.startswith("queues.E05")] == []


def test_the_default_buckets_reach_one_hour():
    assert store.WAIT.bounds()[-2] == 3600.0
    assert store.TOTAL.bounds()[-2] == 3600.0


@pytest.mark.django_db(transaction=True)
def test_a_start_and_a_success_observe_wait_and_total_from_the_meta_stamps(client, queue_redis):
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    first = job.meta[jobmeta.FIRST_ENQUEUED_AT]
    # As a worker would see it: enqueued 30 s ago (rq's enqueued_at, rewritten at each push), first
    # enqueued 100 s ago, started now-10 s and ended now.
    now = dt.datetime.now(dt.UTC)
    job.meta[jobmeta.FIRST_ENQUEUED_AT] = now.timestamp() - 100
    job.enqueued_at = now - dt.timedelta(seconds=30)
    job.started_at = now - dt.timedelta(seconds=10)
    job.ended_at = now
    events.send(events.job_started, queue="default", job=job)
    events.send(events.job_succeeded, queue="default", job=job, duration=10.0)
    found = scraped(client)
    assert first == pytest.approx(dt.datetime.now(dt.UTC).timestamp(), abs=60)
    assert value(found, "optima_queue_job_wait_seconds_count", queue="default") == 1.0
    assert value(found, "optima_queue_job_wait_seconds_sum", queue="default") == pytest.approx(20.0, abs=0.01)
    assert value(found, "optima_queue_job_wait_seconds_bucket", queue="default", le="10") == 0.0
    assert value(found, "optima_queue_job_wait_seconds_bucket", queue="default", le="30") == 1.0
    assert value(found, "optima_queue_job_total_seconds_count", queue="default") == 1.0
    assert value(found, "optima_queue_job_total_seconds_sum", queue="default") == pytest.approx(100.0, abs=0.01)
    assert value(found, "optima_queue_job_total_seconds_bucket", queue="default", le="60") == 0.0
    assert value(found, "optima_queue_job_total_seconds_bucket", queue="default", le="120") == 1.0
    # the seed's histogram is untouched by the new ones
    assert value(found, "optima_queue_job_duration_seconds_count", queue="default") == 1.0
    assert value(found, "optima_queue_job_wait_seconds_count", queue="repricer") == 0.0


def _seconds(moment):
    return moment.replace(tzinfo=moment.tzinfo or dt.UTC).timestamp()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_counts_wait_from_due_and_total_across_retries(client, start_worker, queue_redis, tmp_path):
    runs = tmp_path / "runs"
    delayed = queues.enqueue("orders-sync", "tests.jobs.sample.add", 1, 2, delay=2)
    retried = queues.enqueue("default", "tests.jobs.lifecycle.count_runs", str(runs), fail_times=1)
    stamped = fetch(retried.id, queue_redis).meta[jobmeta.FIRST_ENQUEUED_AT]
    worker = start_worker("default", "orders-sync")  # with rq's scheduler: it moves the delayed job and the retry
    for job in (delayed, retried):
        wait_for(
            lambda job=job: fetch(job.id, queue_redis).get_status() == "finished",
            timeout=60,
            message=f"job {job.id} to finish",
        )
    found = wait_for(
        lambda: (
            lambda f: (
                f
                if value(f, "optima_queue_job_total_seconds_count", queue="default") == 1
                and value(f, "optima_queue_job_total_seconds_count", queue="orders-sync") == 1
                else None
            )
        )(scraped(client)),
        timeout=30,
        message="the totals to be written",
    )

    # The delayed job: its wait runs from when it became due, not from its enqueue two seconds earlier.
    done = fetch(delayed.id, queue_redis)
    first, started = done.meta[jobmeta.FIRST_ENQUEUED_AT], _seconds(done.started_at)
    wait = value(found, "optima_queue_job_wait_seconds_sum", queue="orders-sync")
    assert value(found, "optima_queue_job_wait_seconds_count", queue="orders-sync") == 1.0
    # The wait ends when the start is recorded (rq's prepare_job_execution, the job_started signal); rq then
    # stamps started_at again as it calls the function (Worker.perform_job), a few ms later on a busy box: the
    # stored started_at bounds the wait from above, never below.
    assert 0.0 <= (started - jobmeta.ready_since(done)) - wait < 0.5
    assert wait <= started - first - 0.9  # the 2 s delay (scored in whole seconds by rq) is not wait
    total = value(found, "optima_queue_job_total_seconds_sum", queue="orders-sync")
    assert total == pytest.approx(_seconds(done.ended_at) - first, abs=0.01)

    # The retried job: two attempts waited, one total from the first enqueue, which the retry kept.
    done = fetch(retried.id, queue_redis)
    assert len(runs.read_text().splitlines()) == 2
    assert done.meta[jobmeta.FIRST_ENQUEUED_AT] == stamped
    assert stamped < _seconds(done.enqueued_at) - 0.5  # rq rewrote enqueued_at at the retry's move
    assert value(found, "optima_queue_job_wait_seconds_count", queue="default") == 2.0
    total = value(found, "optima_queue_job_total_seconds_sum", queue="default")
    assert total == pytest.approx(_seconds(done.ended_at) - stamped, abs=0.01)
    assert total >= 1.0  # the default backoff of 1 s before attempt 2 counts in the total
    assert worker.stop() == 0, worker.output()


def test_a_dead_job_an_operator_requeues_counts_its_total_from_the_requeue_not_its_first_life():
    meta = {jobmeta.FIRST_ENQUEUED_AT: 1000.0}
    jobmeta.mark_dead(meta, "exhausted", attempt=5)
    assert jobmeta.new_life(meta, requeued_at=5000.25) is True
    assert (meta[jobmeta.FIRST_ENQUEUED_AT], meta[jobmeta.ATTEMPT]) == (5000.25, 1)
    # a live job (not dead) keeps its first enqueue: a retry or a give-back is the same life
    assert jobmeta.new_life(meta, requeued_at=9000.0) is False
    assert meta[jobmeta.FIRST_ENQUEUED_AT] == 5000.25
