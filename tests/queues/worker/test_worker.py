"""The worker class in-process: OptimaSimpleWorker runs jobs in this very process, so the whole
failure policy, the dead letter, metrics and retention of ``queues.worker.adapter`` are exercised here
without forking. (Real processes and signals: test_shutdown, test_resilience, test_no_fork.)"""

import pytest
from rq.job import JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.metrics import store
from queues.metrics.recorder import tally
from queues.models import DeadLetter
from queues.worker.adapter import OptimaSimpleWorker, OptimaWorker

pytestmark = pytest.mark.django_db(transaction=True)


def run_burst(queue_redis, *names):
    worker = OptimaSimpleWorker([get_queue(n) for n in names or ("default",)], connection=queue_redis)
    worker.work(burst=True, with_scheduler=False)
    return worker


def counters(queue_redis, queue="default"):
    return {k.decode(): v.decode() for k, v in queue_redis.hgetall(store.counters_key(queue)).items()}


def test_the_worker_is_one_class_of_ours_over_rqs():
    assert [c.__qualname__ for c in OptimaWorker.__mro__] == [
        "OptimaWorker",
        "WorkerBehaviour",
        "Worker",
        "BaseWorker",
        "object",
    ]
    assert [c.__qualname__ for c in OptimaSimpleWorker.__mro__] == [
        "OptimaSimpleWorker",
        "WorkerBehaviour",
        "SimpleWorker",
        "BaseWorker",
        "object",
    ]


def test_a_failed_attempt_is_scheduled_again_with_the_policys_backoff(queue_redis):
    job = queues.enqueue("default", "tests.jobs.sample.fail", attempts=3)
    run_burst(queue_redis)
    job = OptimaJob.fetch(job.id, connection=queue_redis)
    assert job.get_status() == JobStatus.SCHEDULED
    assert job.meta["attempt"] == 2
    assert job.meta["last_retry_reason"] == "backoff"
    assert ScheduledJobRegistry("default", connection=queue_redis).get_job_ids() == [job.id]
    failed_at = job.meta["last_failed_at"]
    score = queue_redis.zscore(ScheduledJobRegistry("default", connection=queue_redis).key, job.id)
    import datetime as dt

    assert score - dt.datetime.fromisoformat(failed_at).timestamp() == pytest.approx(1.0, abs=0.01)
    assert counters(queue_redis)["failed"] == "1"
    assert counters(queue_redis)["retried"] == "1"


def test_the_last_failed_attempt_is_dead_lettered_and_mirrored(queue_redis):
    job = queues.enqueue("default", "tests.jobs.sample.fail", "no luck", attempts=1)
    run_burst(queue_redis)
    job = OptimaJob.fetch(job.id, connection=queue_redis)
    assert job.get_status() == JobStatus.FAILED
    assert job.meta["dead"] == "exhausted"
    assert job.id in FailedJobRegistry("default", connection=queue_redis)
    row = DeadLetter.objects.get(job_id=job.id)
    assert (row.reason, row.attempts_made, row.exc_message) == ("exhausted", 1, "no luck")
    assert counters(queue_redis)["dead"] == "1"


def test_a_success_is_recorded_counted_and_the_worker_writes_metrics_only_in_its_own_pipeline(queue_redis):
    jobs = [queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in range(3)]
    run_burst(queue_redis)
    assert [OptimaJob.fetch(j.id, connection=queue_redis).return_value() for j in jobs] == [1, 2, 3]
    assert counters(queue_redis)["processed"] == "3"
    assert queue_redis.llen(store.durations_key("default")) == 3
    assert tally.pending() is False
    assert tally.deferred is False  # the worker leaves the process as it found it


def test_completed_jobs_beyond_completed_max_are_trimmed_when_the_worker_goes_idle(queue_redis, settings):
    settings.OPTIMA_QUEUES = dict(settings.OPTIMA_QUEUES, default={"completed_max": 2})
    jobs = [queues.enqueue("default", "tests.jobs.sample.add", n, 0) for n in range(5)]
    run_burst(queue_redis)
    from rq.registry import FinishedJobRegistry

    assert FinishedJobRegistry("default", connection=queue_redis).get_job_ids() == [j.id for j in jobs[-2:]]
    assert queue_redis.exists(OptimaJob.key_for(jobs[0].id)) == 0


def test_a_paused_queue_is_left_alone_by_the_worker(queue_redis):
    from queues.worker import pause

    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    pause.pause("default", queue_redis)
    run_burst(queue_redis)
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status() == JobStatus.QUEUED
    pause.resume("default", queue_redis)
    run_burst(queue_redis)
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status() == JobStatus.FINISHED


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_hash_cannot_be_read_is_dead_lettered_as_corrupt_with_its_raw_hash_and_the_worker_goes_on(
    queue_redis, tmp_path, caplog
):
    import logging

    from rq import Queue
    from rq.serializers import DefaultSerializer

    from queues.failures.deadletter import decode_raw_hash
    from queues.models import DeadLetter

    marker = tmp_path / "ran"
    pickled = Queue("default", connection=queue_redis, serializer=DefaultSerializer).enqueue(
        "tests.jobs.sample.touch", str(marker), meta={"x": 1}
    )  # its data and meta are pickles: not JSON
    raw = queue_redis.hgetall(OptimaJob.key_for(pickled.id))
    good = queues.enqueue("default", "tests.jobs.sample.add", 2, 3)
    with caplog.at_level(logging.ERROR):
        run_burst(queue_redis)
    assert OptimaJob.fetch(good.id, connection=queue_redis).return_value() == 5
    assert not marker.exists()
    assert queue_redis.hgetall(OptimaJob.key_for(pickled.id)) == raw  # left in Redis, untouched
    assert get_queue("default").get_job_ids() == []
    assert queue_redis.llen(get_queue("default").intermediate_queue_key) == 0
    assert queue_redis.zscore(get_queue("default").failed_job_registry.key, pickled.id) == float("inf")
    row = DeadLetter.objects.get(job_id=pickled.id)
    assert (row.reason, row.queue, row.status) == ("corrupt", "default", "open")
    assert dict(decode_raw_hash(row.raw_hash)) == raw
    logged = [r.getMessage() for r in caplog.records if "(corrupt)" in r.getMessage()]
    assert len(logged) == 1 and OptimaJob.key_for(pickled.id) in logged[0], logged
