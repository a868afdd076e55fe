"""Priority bands (issue 20): ``queues.enqueue(..., priority=)`` puts a job in its queue's high (> 0), normal
(0) or low (< 0) band; workers pop every high job before any normal one before any low one, FIFO within
a band, in one atomic pop (queues/worker/dequeue.py); counts, lists, pause, retries and give-backs treat
the three as one queue (queues/catalog/classes.py)."""

import pytest
from rq.registry import ScheduledJobRegistry
from rq.utils import current_timestamp

import queues
from queues.catalog.lookup import OptimaJob, OptimaQueue, get_queue
from queues.exceptions import InvalidJob
from queues.failures.operations import find_job
from queues.keyspace import keys
from queues.periodic.scheduler import PrefixedScheduler
from queues.periodic.supervision import ResilientRQScheduler
from queues.producer.cancel import cancel_job
from queues.worker import pause
from queues.worker.abandoned import Scan
from queues.worker.dequeue import Dequeuer
from tests.support import wait_for
from tests.support.lifecycle import WORKER_ENV, wait_row
from tests.support.worker import plant_started

TOUCH = "tests.jobs.sample.touch"
RECORD = "tests.jobs.priority.record"


def _ids(connection, key):
    return [v.decode() for v in connection.lrange(key, 0, -1)]


def _interleaved(path):
    """Three jobs of each band, enqueued low, normal, high in turn; -> {band: [job ids]}."""
    jobs = {"high": [], "normal": [], "low": []}
    for i in range(3):
        for band, priority in (("low", -5), ("normal", 0), ("high", 5)):
            jobs[band].append(queues.enqueue("default", TOUCH, str(path), f"{band}-{i}", priority=priority).id)
    return jobs


def test_jobs_go_to_their_band_and_the_queue_counts_and_lists_them_in_pop_order(queue_redis, tmp_path):
    jobs = _interleaved(tmp_path / "runs")
    queue = get_queue("default")
    high, normal, low = keys.band_keys(queue.key)
    assert (_ids(queue_redis, high), _ids(queue_redis, normal), _ids(queue_redis, low)) == (
        jobs["high"],
        jobs["normal"],
        jobs["low"],
    )
    in_order = jobs["high"] + jobs["normal"] + jobs["low"]
    assert queue.count == 9
    assert queue.get_job_ids() == in_order
    assert queue.get_job_ids(2, 3) == in_order[2:5]
    assert queue.get_job_ids(7) == in_order[7:]
    assert queue.get_job_position(jobs["low"][0]) == 6
    assert queue.fetch_job(jobs["high"][0]).meta["priority"] == 5
    assert "priority" not in queue.fetch_job(jobs["normal"][0]).meta


@pytest.mark.parametrize("value", [True, 1.5, "high", None])
def test_a_priority_that_is_not_an_integer_is_refused_naming_it(value):
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("default", TOUCH, "x", priority=value)
    assert (
        f"priority must be an integer (> 0: high band, 0: normal, < 0: low band), got {type(value).__name__} "
        f"{value!r}" in str(caught.value)
    )


def test_priority_with_a_limit_key_is_refused_naming_both():
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("default", TOUCH, "x", priority=1, limit_key="seller:1", limit_concurrency=1)
    assert str(caught.value).startswith("priority=1 with limit_key='seller:1': a job held by its limit key")


@pytest.mark.django_db(transaction=True)  # enqueues written at once, not on a commit that never comes
def test_the_panels_delete_takes_a_job_out_of_its_band(queue_redis, settings, tmp_path):
    from django.test import Client

    settings.OPTIMA_ENV = "dev"
    jobs = _interleaved(tmp_path / "runs")
    gone = [jobs["high"][1], jobs["low"][0]]
    index = sorted(settings.RQ_QUEUES).index("default")
    response = Client().post(f"/admin/queues/queues/actions/{index}/", {"action": "delete", "job_ids": gone})
    assert response.status_code == 302
    queue = get_queue("default")
    assert queue.count == 7 and not set(gone) & set(queue.get_job_ids())
    assert queue_redis.exists(*(OptimaJob.key_for(job_id) for job_id in gone)) == 0


def test_a_paused_queue_with_only_a_high_job_is_not_popped(queue_redis, tmp_path):
    job = queues.enqueue("default", TOUCH, str(tmp_path / "runs"), priority=1)
    queue = get_queue("default")
    pause.pause("default", queue_redis)
    dequeuer = Dequeuer(queue_redis, pause_poll=0.1)
    assert dequeuer.pop([queue], 1) is None
    assert dequeuer.paused == {"default"}
    assert _ids(queue_redis, keys.band_key(queue.key, "high")) == [job.id]
    pause.resume("default", queue_redis)
    assert dequeuer.pop([queue], None) == (queue, job.id)


def test_a_popped_high_job_left_by_its_worker_goes_back_to_the_head_of_the_high_band(queue_redis, tmp_path):
    queue = get_queue("default")
    first, second = (queues.enqueue("default", TOUCH, str(tmp_path / "runs"), priority=3) for _ in range(2))
    assert Dequeuer(queue_redis).pop([queue], None) == (queue, first.id)  # then its worker dies
    scan = Scan(queue_redis, ["default"], stale_after=0)
    scan.run()  # sees it
    assert scan.run()["requeued"] == 1  # seen twice: given back
    assert _ids(queue_redis, keys.band_key(queue.key, "high")) == [first.id, second.id]
    assert _ids(queue_redis, queue.key) == []


def test_a_high_job_is_canceled_from_its_band_and_the_queue_is_emptied_across_bands(queue_redis, tmp_path):
    jobs = _interleaved(tmp_path / "runs")
    assert cancel_job(jobs["high"][1], queue_redis).outcome == "canceled"
    queue = get_queue("default")
    assert queue.count == 8
    assert queue.remove(jobs["low"][2]) == 1
    assert queue.empty() == 7
    assert queue.count == 0
    assert [queue_redis.exists(key) for key in keys.band_keys(queue.key)] == [0, 0, 0]


def _runs(path):
    return path.read_text().split() if path.exists() else []


IN_ORDER = [f"{band}-{i}" for band in ("high", "normal", "low") for i in range(3)]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_runs_every_high_job_then_normal_then_low_each_band_in_enqueue_order(start_worker, tmp_path):
    runs = tmp_path / "runs"
    _interleaved(runs)
    worker = start_worker("default", "--burst")
    assert worker.wait(60) == 0, worker.output()
    assert _runs(runs) == IN_ORDER


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_high_job_retried_at_once_goes_back_to_the_high_band(start_worker, tmp_path):
    runs = tmp_path / "runs"
    queues.enqueue("default", RECORD, str(runs), "normal")
    queues.enqueue("default", RECORD, str(runs), "high", retries=1, priority=1)
    worker = start_worker("default", "--burst")
    assert worker.wait(60) == 0, worker.output()
    assert _runs(runs) == ["high", "high", "normal"]  # in the normal band it would have run after "normal"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_fork_free_worker_honours_the_bands(start_worker, tmp_path):
    runs = tmp_path / "runs"
    _interleaved(runs)
    worker = start_worker("default", "--burst", "--no-fork")
    assert worker.wait(60) == 0, worker.output()
    assert _runs(runs) == IN_ORDER


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_pool_member_honours_the_bands(start_worker, tmp_path):
    runs = tmp_path / "runs"
    _interleaved(runs)
    pool = start_worker("default", "--num-workers", "1", "--burst", command="rqworker-pool")
    assert pool.wait(90) == 0, pool.output()
    assert _runs(runs) == IN_ORDER


# -- the return paths: RQ's scheduler (delays, backoffs), dead letters, the abandoned-job scan --------------------
FAIL_ONCE = "tests.jobs.priority.fail_once"


def _move_due(connection, name):
    """What a worker's RQ scheduler does once it holds the queue's lock."""
    scheduler = ResilientRQScheduler([name], connection=connection)
    assert scheduler.acquire_locks() == {name}
    try:
        return scheduler.enqueue_scheduled_jobs()
    finally:
        scheduler.release_locks()


def _due(connection, name, job_id):
    registry = ScheduledJobRegistry(name, connection=connection)
    return job_id in registry.get_jobs_to_schedule(current_timestamp())


def test_delayed_jobs_land_in_their_band_when_rqs_scheduler_moves_them(queue_redis, tmp_path):
    runs = str(tmp_path / "runs")
    jobs = {
        band: queues.enqueue("default", TOUCH, runs, band, priority=priority, delay=1)
        for band, priority in (("low", -1), ("normal", 0), ("high", 1))
    }
    wait_for(
        lambda: all(_due(queue_redis, "default", job.id) for job in jobs.values()),
        timeout=10,
        message="the delayed jobs due",
    )
    _move_due(queue_redis, "default")
    queue = get_queue("default")
    assert [_ids(queue_redis, key) for key in keys.band_keys(queue.key)] == [
        [jobs["high"].id],
        [jobs["normal"].id],
        [jobs["low"].id],
    ]
    assert queue_redis.zcard(ScheduledJobRegistry("default", connection=queue_redis).key) == 0
    assert queue.fetch_job(jobs["high"].id).get_status() == "queued"


def test_rq_schedulers_push_goes_through_the_queue_class_and_so_to_the_jobs_band(queue_redis):
    scheduler = PrefixedScheduler(queue_name="default", connection=queue_redis)
    job = queues.enqueue("default", TOUCH, "x", "high", priority=2)
    get_queue("default").remove(job)
    assert isinstance(scheduler.get_queue_for_job(job), OptimaQueue)
    scheduler.enqueue_job(job)
    assert _ids(queue_redis, keys.band_key(keys.queue_key("default"), "high")) == [job.id]
    assert _ids(queue_redis, keys.queue_key("default")) == []


def _dead_high_job(queue_redis, runs, label, start_worker):
    job = queues.enqueue("lifecycle", FAIL_ONCE, runs, label, attempts=1, priority=4)
    worker = start_worker("lifecycle", "--burst", "--without-scheduler", env=WORKER_ENV)
    assert worker.wait(60) == 0, worker.output()
    return job, wait_row(job.id)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_dead_high_job_retried_from_its_dead_letter_goes_back_to_the_high_band(
    start_worker, queue_redis, tmp_path, lifecycle_queue
):
    from queues.failures.operations import discard_dead_letter, retry_dead_letter

    runs = str(tmp_path / "runs")
    in_place, in_place_row = _dead_high_job(queue_redis, runs, "in-place", start_worker)
    rebuilt, rebuilt_row = _dead_high_job(queue_redis, runs, "rebuilt", start_worker)
    assert rebuilt_row.carried == '{"priority": 4}'
    assert discard_dead_letter(rebuilt_row.pk).outcome == "ok"  # its job gone: rebuilt from the row

    assert retry_dead_letter(in_place_row.pk).outcome == "ok"
    outcome = retry_dead_letter(rebuilt_row.pk)
    assert outcome.outcome == "ok", outcome
    high, normal, low = keys.band_keys(keys.queue_key("lifecycle"))
    assert _ids(queue_redis, high) == [in_place.id, outcome.job_id]
    assert _ids(queue_redis, normal) == [] and _ids(queue_redis, low) == []
    assert OptimaJob.fetch(outcome.job_id, connection=queue_redis).meta["priority"] == 4
    located = find_job(in_place.id, queue_redis)["locations"]
    assert located == [("lifecycle", "queued")]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_high_job_retried_after_its_backoff_runs_again_from_the_high_band(
    start_worker, queue_redis, tmp_path, lifecycle_queue
):
    runs = tmp_path / "runs"
    flaky = queues.enqueue("lifecycle", FAIL_ONCE, str(runs), "high", attempts=2, priority=1)
    # popped after the failure, it holds the worker until RQ's scheduler has moved the retry (backoff 1 s)
    queues.enqueue("lifecycle", "tests.jobs.priority.wait_until_moved", str(runs), "blocker", flaky.id, "lifecycle")
    queues.enqueue("lifecycle", RECORD, str(runs), "normal")
    start_worker("lifecycle", env=WORKER_ENV)
    wait_for(lambda: len(_runs(runs)) == 4, timeout=60, message="four runs")
    assert _runs(runs) == ["high", "blocker", "high", "normal"]  # in the normal band: after "normal"


def test_the_abandoned_scans_retry_of_a_high_job_comes_back_to_the_high_band(queue_redis, lifecycle_queue):
    job = queues.enqueue("lifecycle", TOUCH, "x", "high", priority=1)
    queue_redis.lrem(keys.band_key(keys.queue_key("lifecycle"), "high"), 1, job.id)
    plant_started(queue_redis, job)  # its worker was killed: no liveness key
    assert Scan(queue_redis, ["lifecycle"], stale_after=0).run()["retried"] == 1
    queue_redis.zadd(ScheduledJobRegistry("lifecycle", connection=queue_redis).key, {job.id: 0})  # backoff over
    _move_due(queue_redis, "lifecycle")
    assert _ids(queue_redis, keys.band_key(keys.queue_key("lifecycle"), "high")) == [job.id]
    assert OptimaJob.fetch(job.id, connection=queue_redis).meta["attempt"] == 2
