"""queues/worker/attempt.py: the starts of the jobs one pop took, written together by the concurrent worker's main
thread (``begin_together``). (A job's start and success in real worker processes: test_concurrency, test_no_fork,
test_shutdown, test_stop.)"""

import pytest
from rq.job import JobStatus
from rq.registry import StartedJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.connection import batch
from queues.keyspace import keys
from queues.worker import attempt
from queues.worker.concurrent import OptimaConcurrentWorker

pytestmark = pytest.mark.django_db(transaction=True)


def popped(queue_redis, count):
    """A concurrent worker and ``count`` jobs it popped in one pop, read and vetted as its main thread does, and not
    started by the pop: as the jobs a pop could not start (queues/worker/popstart.py), which ``begin_together``
    starts."""
    ids = [queues.enqueue("default", "tests.jobs.sample.add", n, 1).id for n in range(count)]
    worker = OptimaConcurrentWorker([get_queue("default")], connection=queue_redis, concurrency=count)
    worker.starts_with_pop = False
    queue = get_queue("default")
    jobs = []
    for _ in range(count):
        found = worker.intake.dequeuer.pop([queue], None, count=count)
        jobs.append(worker.intake.fetch(found[0], found[1], found.data))
    assert [job.id for job in jobs] == ids
    assert queue_redis.llen(keys.intermediate_key(queue.key)) == count
    return worker, jobs


def test_the_jobs_of_one_pop_start_in_one_round_trip(queue_redis, redis_sends):
    worker, jobs = popped(queue_redis, 3)
    # The batch script as a running worker has it, loaded by its first call: a Redis that has never run it answers
    # that first EVALSHA with NOSCRIPT, and redis-py loads it and sends the call again (3 sends, once). Without this
    # the count depended on whether an earlier test had run it on the same Redis.
    queue_redis.script_load(batch.BATCH_LUA)
    before = redis_sends()
    executions = attempt.begin_together(worker, jobs)
    assert redis_sends(before) == 1
    started = StartedJobRegistry("default", connection=queue_redis)
    for job, execution in zip(jobs, executions):
        assert execution is not None and worker.executions[execution.id] is execution
        assert queue_redis.zscore(started.key, execution.composite_key) is not None
        stored = OptimaJob.fetch(job.id, connection=queue_redis)
        assert stored.get_status() == JobStatus.STARTED and stored.worker_name == worker.name
    assert queue_redis.llen(keys.intermediate_key(get_queue("default").key)) == 0


def test_a_start_refused_by_redis_is_left_to_the_job_s_thread_and_the_others_start(queue_redis):
    """A job key of another type (planted): that start fails alone; its job gets no execution (its thread's
    ``attempt.begin`` sets the key aside and starts it, as for a job popped alone)."""
    worker, jobs = popped(queue_redis, 3)
    queue_redis.delete(jobs[1].key)
    queue_redis.set(jobs[1].key, "planted")
    executions = attempt.begin_together(worker, jobs)
    assert executions[1] is None
    assert executions[0] is not None and executions[2] is not None
    for number in (0, 2):
        assert OptimaJob.fetch(jobs[number].id, connection=queue_redis).get_status() == JobStatus.STARTED


def test_no_job_starts_together_once_a_stop_is_asked_for(queue_redis, redis_sends):
    worker, jobs = popped(queue_redis, 2)
    worker.stop.request(running=True)
    before = redis_sends()
    assert attempt.begin_together(worker, jobs) == [None, None]
    assert redis_sends(before) == 0
    assert queue_redis.llen(keys.intermediate_key(get_queue("default").key)) == 2
