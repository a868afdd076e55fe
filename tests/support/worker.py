"""Worker-side helpers: a burst OptimaWorker in this process, jobs planted with Redis commands only, and
checks of where a job sits after a worker let it go."""

import uuid
import zlib

import pytest
from django.core.checks import run_checks
from rq.job import JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import execution as execution_record
from queues.jobs import signing
from queues.keyspace import keys
from queues.worker import pause
from queues.worker.adapter import OptimaWorker
from tests.jobs.resilience import ends, runs, starts
from tests.support import wait_for
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


def w063(settings, records_on=False):
    """The ``queues.W063`` messages of the checks tagged ``redis``, with ``RQ_EXECUTION_RECORDS`` set to
    ``records_on`` (queues/jobs/execution.py: a job a worker of a release up to 6f24d7d runs)."""
    settings.OPTIMA_QUEUES_OPTIONS = {**settings.OPTIMA_QUEUES_OPTIONS, "RQ_EXECUTION_RECORDS": records_on}
    return [m for m in run_checks(tags=["redis"]) if m.id == "queues.W063"]


# A worker process with rq's own execution records (QUEUE_RQ_EXECUTION_RECORDS "1") and without ("0", the default):
# queues/jobs/execution.py. The test takes ``rq_records`` and passes it in the worker's environment.
WITH_AND_WITHOUT_RQ_RECORDS = pytest.mark.parametrize(
    "rq_records", ["1", "0"], ids=["rq-execution-records", "no-rq-execution-records"]
)


def started_entries(connection, queue="default"):
    """The entries of ``queue``'s started registry (``<job id>:<execution id>``), as text, in its order."""
    return [entry.decode() for entry in connection.zrange(keys.started_key(queue), 0, -1)]


def paused_seen_by(worker, connection, queue="default"):
    """Pause ``queue`` and wait until the idle ``worker`` has seen it (its INFO line): its next pop is then the first
    after the resume. An idle worker of one queue blocks in BLMOVE and looks at the pause only when that returns: a
    job enqueued while it still blocks is taken, and put back only if the queue is still paused when it looks, which
    on a loaded machine can be after the test's resume (that job then ran popped alone: CI failed on it)."""
    pause.pause(queue, connection)
    wait_for(
        lambda: f"paused queues left alone: {queue}" in worker.output(),
        timeout=30,
        message=f"the worker to see queue {queue} paused",
    )


def assert_jobs_popped_ahead_go_back(start_worker, connection, tmp_path, worker_args, holders, held):
    """A worker (``worker_args``) warmed with quick jobs pops ahead (queues/worker/prefetch.py); ``holders`` long jobs
    then take all it can run at once, popped in one pop with three quick ones after them, ``held`` of which that pop
    took. Checked: those go back to the head of their queue, in their order, their start taken back, once held past
    ``PREFETCH_HOLD_SECONDS``; a second worker runs them while the long ones still run; each job runs once, at its
    first attempt."""
    gate_log, log, release = tmp_path / "gates.jsonl", tmp_path / "quick.jsonl", tmp_path / "go"
    # Quick jobs, so that the worker's run-time average is under the threshold when the long ones come: 0.5 s in this
    # worker (tests/support/prefetch_settings.py says why), so that a loaded machine's slow jobs keep it there.
    warm = queues.enqueue_many("default", "tests.jobs.sample.add", [(n, 1) for n in range(20)])
    first = start_worker("default", *worker_args, env={"DJANGO_SETTINGS_MODULE": "tests.support.prefetch_settings"})
    wait_for(lambda: all(fetch(job.id, connection).get_status() == JobStatus.FINISHED for job in warm), timeout=60)
    # Paused while the rest is enqueued, so that the first pop after the resume finds them all: the long jobs, then
    # three quick ones.
    paused_seen_by(first, connection)
    gates = [
        queues.enqueue("default", "tests.jobs.resilience.wait_for_file_then_return", str(gate_log), str(release))
        for _ in range(holders)
    ]
    after = [queues.enqueue("default", "tests.jobs.resilience.quick", str(log), n) for n in range(3)]
    pause.resume("default", connection)
    wait_for(
        lambda: f"{held} job(s) popped ahead of a free slot went back" in first.output(),
        timeout=60,
        message=f"the {held} job(s) popped with the long ones to go back",
    )
    assert len(starts(gate_log)) == holders and not starts(log), first.output()
    assert get_queue("default").get_job_ids() == [job.id for job in after], "back at the head, in their order"
    assert sorted(entry.split(":")[0] for entry in started_entries(connection)) == sorted(job.id for job in gates)

    second = start_worker("default", "--burst", "--no-fork")
    assert second.wait(60) == 0, second.output()
    assert [fetch(job.id, connection).return_value() for job in after] == [0, 1, 2]
    assert {r["pid"] for r in starts(log)} == {second.pid}, "run by the second worker"
    assert not ends(gate_log), "the long jobs still run in the first worker"
    release.touch()
    wait_for(lambda: all(fetch(job.id, connection).get_status() == JobStatus.FINISHED for job in gates), timeout=60)
    assert sorted(r["n"] for r in starts(log)) == [0, 1, 2], "each quick job ran once"
    assert len(runs(log)) == 6, "each quick job ran once (a start and an end each)"
    assert [fetch(job.id, connection).meta["attempt"] for job in [*gates, *after]] == [1] * (holders + 3)
    assert first.stop() == 0, first.output()


MIB = 1024 * 1024


def bomb(megabytes):
    """rq's JSON ``data`` of ``sample.add`` with one argument of ``megabytes`` MiB, zlib-compressed a MiB at a time
    (never held inflated here)."""
    packer = zlib.compressobj()
    parts = [packer.compress(b'["tests.jobs.sample.add", null, ["')]
    chunk = b"a" * MIB
    parts.extend(packer.compress(chunk) for _ in range(megabytes))
    parts.append(packer.compress(b'"], {}]'))
    parts.append(packer.flush())
    return b"".join(parts)
