"""Priority bands (issue 20): ``queues.enqueue(..., priority=)`` puts a job in its queue's high (> 0), normal
(0) or low (< 0) band; workers pop every high job before any normal one before any low one, FIFO within
a band, in one atomic pop (queues/worker/dequeue.py); counts, lists, pause, retries and give-backs treat
the three as one queue (queues/catalog/classes.py)."""
import pytest

import queues
from queues.catalog.lookup import get_queue
from queues.exceptions import InvalidJob
from queues.keyspace import keys
from queues.producer.cancel import cancel_job
from queues.worker import pause
from queues.worker.abandoned import Scan
from queues.worker.dequeue import Dequeuer

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
        jobs["high"], jobs["normal"], jobs["low"])
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
    assert f"priority must be an integer (> 0: high band, 0: normal, < 0: low band), got {type(value).__name__} " \
           f"{value!r}" in str(caught.value)


def test_priority_with_a_limit_key_is_refused_naming_both():
    with pytest.raises(InvalidJob) as caught:
        queues.enqueue("default", TOUCH, "x", priority=1, limit_key="seller:1", limit_concurrency=1)
    assert str(caught.value).startswith("priority=1 with limit_key='seller:1': a job held by its limit key")


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
def test_a_worker_runs_every_high_job_then_normal_then_low_each_band_in_enqueue_order(start_worker, tmp_path):
    runs = tmp_path / "runs"
    _interleaved(runs)
    worker = start_worker("default", "--burst")
    assert worker.wait(60) == 0, worker.output()
    assert _runs(runs) == IN_ORDER


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_high_job_retried_at_once_goes_back_to_the_high_band(start_worker, tmp_path):
    runs = tmp_path / "runs"
    queues.enqueue("default", RECORD, str(runs), "normal")
    queues.enqueue("default", RECORD, str(runs), "high", retries=1, priority=1)
    worker = start_worker("default", "--burst")
    assert worker.wait(60) == 0, worker.output()
    assert _runs(runs) == ["high", "high", "normal"]  # in the normal band it would have run after "normal"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_fork_free_worker_honours_the_bands(start_worker, tmp_path):
    runs = tmp_path / "runs"
    _interleaved(runs)
    worker = start_worker("default", "--burst", "--no-fork")
    assert worker.wait(60) == 0, worker.output()
    assert _runs(runs) == IN_ORDER


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_pool_member_honours_the_bands(start_worker, tmp_path):
    runs = tmp_path / "runs"
    _interleaved(runs)
    pool = start_worker("default", "--num-workers", "1", "--burst", command="rqworker-pool")
    assert pool.wait(90) == 0, pool.output()
    assert _runs(runs) == IN_ORDER
