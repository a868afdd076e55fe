"""Worker-side helpers: a burst OptimaWorker in this process, jobs planted with Redis commands only, and
checks of where a job sits after a worker let it go."""

import uuid

import pytest
from rq.job import JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry

from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import execution as execution_record
from queues.jobs import signing
from queues.keyspace import keys
from queues.worker.adapter import OptimaWorker
from tests.support.lifecycle import fetch


def run_burst(connection, *names):
    worker = OptimaWorker([get_queue(n, connection=connection) for n in (names or ("default",))], connection=connection)
    worker.work(burst=True, with_scheduler=False)
    return worker


def plant(connection, func, args=(), kwargs=None, *, signed=False, origin="default", queue="default", **fields):
    """A job hash written with Redis commands only, pushed onto ``queue``; -> its id."""
    # Ids with a letter and a digit, so that a failure fingerprint always reads them as "<hex>": an
    # all-digit one ("<n>", 2 % of 8 random hex digits) put two planted jobs in two failure groups.
    job = OptimaJob.create(
        func,
        args=list(args),
        kwargs=kwargs or {},
        connection=connection,
        id=f"planted-{uuid.uuid4().hex[:6]}1a",
        origin=origin,
        meta={"queue": origin, "attempt": 1, "attempts_allowed": 5},
    )
    if signed:
        job.signature = signing.sign(job)
    job.save()
    if fields:
        connection.hset(job.key, mapping=fields)
    connection.rpush(keys.queue_key(queue), job.id)
    return job.id


def assert_back_at_head_of_queue(job, connection, name="default"):
    job = fetch(job.id, connection)
    assert job.get_status() == JobStatus.QUEUED
    assert get_queue(name).get_job_ids()[0] == job.id
    assert job.id not in FinishedJobRegistry(name, connection=connection)
    assert job.id not in FailedJobRegistry(name, connection=connection)
    assert StartedJobRegistry(name, connection=connection).get_job_ids(cleanup=False) == []
    assert job.latest_result() is None  # recorded neither as done nor as failed
    assert job.meta["attempt"] == 1  # the attempt is not counted
    assert job.meta["interruptions"] == 1
    return job


def plant_started(connection, job, worker_name="gone-worker", execution_id="e1", release="this"):
    """Register ``job`` as started by a worker that has no liveness key (dead), as this release's worker
    writes it (the job's hash names the execution: queues/jobs/execution.py) or, ``release="last"``, as a
    release before issue 36's fifth pass did (an execution hash naming the worker)."""
    composite = f"{job.id}:{execution_id}"
    connection.zadd(keys.started_key(job.origin), {composite: 9999999999})
    fields = {"status": JobStatus.STARTED.value, "worker_name": worker_name}
    if release == "last":
        connection.hset(keys.execution_key(composite), mapping={"worker_name": worker_name, "job_id": job.id})
    else:
        fields[execution_record.FIELD] = execution_id
    connection.hset(job.key, mapping=fields)


# A worker process with rq's own execution records (QUEUE_RQ_EXECUTION_RECORDS "1", the default) and without ("0"):
# queues/jobs/execution.py. The test takes ``rq_records`` and passes it in the worker's environment.
WITH_AND_WITHOUT_RQ_RECORDS = pytest.mark.parametrize(
    "rq_records", ["1", "0"], ids=["rq-execution-records", "no-rq-execution-records"]
)


def started_entries(connection, queue="default"):
    """The entries of ``queue``'s started registry (``<job id>:<execution id>``), as text, in its order."""
    return [entry.decode() for entry in connection.zrange(keys.started_key(queue), 0, -1)]
