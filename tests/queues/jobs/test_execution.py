"""An attempt's record (queues/jobs/execution.py) against the real Redis: what a start and an end write, who
owns a started entry, and what the panel's started list shows; an entry a release before issue 36's fifth pass
wrote (an execution hash) read as before."""

import time

import pytest
import redis
from rq.executions import Execution as RQExecution
from rq.executions import ExecutionRegistry

import queues
from queues.catalog.lookup import OptimaJob
from queues.jobs import execution as execution_record
from queues.jobs.execution import Execution
from queues.keyspace import keys
from tests.support.worker import plant_started, run_burst, w063

WORKER = "w-exec"


def started(queue_redis, worker_name=WORKER, rq_records=False):
    """A job started as an OptimaWorker that runs its jobs itself starts it; ``(job, execution, commands)``."""
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    queue_redis.lrem(keys.queue_key("default"), 1, job.id)
    with queue_redis.pipeline() as pipe:
        execution = Execution.create(job, 600, pipeline=pipe, worker_name=worker_name, rq_records=rq_records)
        execution_record.started_into(job, worker_name, execution, pipe)
        commands = len(pipe.command_stack)
        pipe.execute()
    return job, execution, commands


def test_a_start_writes_the_started_entry_and_the_job_s_hash_and_no_other_record(queue_redis):
    job, execution, commands = started(queue_redis)
    assert commands == 2  # ZADD, HSET (rq's Execution.create and prepare_for_execution: 8)
    composite = f"{job.id}:{execution.id}"
    assert queue_redis.zscore(keys.started_key("default"), composite) > time.time() + 500
    fields = queue_redis.hmget(job.key, "status", "worker_name", execution_record.FIELD)
    assert fields == [b"started", WORKER.encode(), execution.id.encode()]
    others = (keys.execution_key(composite), keys.job_executions_key(job.id), keys.worker_executions_key(WORKER))
    assert not queue_redis.exists(*others)
    assert job.get_executions() == []  # rq's reader finds none, and does not raise
    assert execution_record.owners(queue_redis, [composite]) == [WORKER]


def test_with_rq_execution_records_the_start_also_writes_rq_s_hash_and_the_worker_s_set(queue_redis):
    job, execution, commands = started(queue_redis, rq_records=True)
    assert commands == 6  # + HSET and EXPIRE of the hash, SADD and EXPIRE of the worker's set
    composite = f"{job.id}:{execution.id}"
    assert 0 < queue_redis.ttl(keys.execution_key(composite)) <= 600
    read = RQExecution.fetch(execution.id, job.id, connection=queue_redis)  # as the last release's panel does
    assert (read.worker_name, read.job_id) == (WORKER, job.id)
    assert queue_redis.smembers(keys.worker_executions_key(WORKER)) == {composite.encode()}
    assert 0 < queue_redis.ttl(keys.worker_executions_key(WORKER)) <= 660
    assert not queue_redis.exists(keys.job_executions_key(job.id))
    assert execution_record.owners(queue_redis, [composite]) == [WORKER]


@pytest.mark.parametrize("rq_records,commands", [(False, 1), (True, 3)])
def test_the_end_takes_the_entry_the_member_and_the_hash_off(queue_redis, rq_records, commands):
    job, execution, _ = started(queue_redis, rq_records=rq_records)
    with queue_redis.pipeline() as pipe:
        execution.delete(job=job, pipeline=pipe)
        assert len(pipe.command_stack) == commands  # ZREM (and DEL, SREM); rq's: DEL, ZREM, ZREM, SREM
        pipe.execute()
    assert queue_redis.zcard(keys.started_key("default")) == 0
    assert not queue_redis.exists(keys.worker_executions_key(WORKER))
    assert not queue_redis.exists(keys.execution_key(f"{job.id}:{execution.id}"))


@pytest.mark.parametrize("rq_records", [False, True])
def test_a_heartbeat_pushes_the_entry_s_expiry_on_and_brings_back_no_ended_one(queue_redis, rq_records):
    job, execution, _ = started(queue_redis, rq_records=rq_records)
    composite = f"{job.id}:{execution.id}"
    registry = OptimaJob.fetch(job.id, connection=queue_redis).started_job_registry
    with queue_redis.pipeline() as pipe:
        execution.heartbeat(registry, 7200, pipe)
        pipe.execute()
    assert queue_redis.zscore(keys.started_key("default"), composite) > time.time() + 7000
    ttl = queue_redis.ttl(keys.execution_key(composite))
    assert ttl > 7000 if rq_records else ttl == -2  # -2: no such key
    with queue_redis.pipeline() as pipe:
        execution.delete(job=job, pipeline=pipe)
        execution.heartbeat(registry, 7200, pipe)  # a beat after the end (rq's race): no entry comes back
        pipe.execute()
    assert queue_redis.zcard(keys.started_key("default")) == 0


def test_the_owner_of_an_entry_is_the_job_s_worker_while_the_job_names_it(queue_redis):
    current = queues.enqueue("default", "tests.jobs.sample.add", 1, 1)
    plant_started(queue_redis, current, worker_name="w-now", execution_id="e2")
    last = queues.enqueue("default", "tests.jobs.sample.add", 2, 2)
    plant_started(queue_redis, last, worker_name="w-last", release="last")
    plain = queues.enqueue("default", "tests.jobs.sample.add", 3, 3)
    queue_redis.set(keys.job_key("wrong-type"), "a string, not a hash")
    composites = [
        f"{current.id}:e2",  # the job's current execution
        f"{current.id}:e1",  # one it has left (stale)
        f"{last.id}:e1",  # written by the last release: its hash names the worker
        f"{plain.id}:e1",  # a job that names no execution
        "gone-job:e1",  # no job
        "wrong-type:e1",  # a job key that is not a hash
        f"{current.id}:e2:extra",  # not <job id>:<execution id>
    ]
    assert execution_record.owners(queue_redis, composites) == ["w-now", "", "w-last", "", "", "", ""]


def test_the_started_list_shows_the_job_s_start_and_heartbeat_and_leaves_out_a_stale_entry(queue_redis):
    job, execution, _ = started(queue_redis)
    job = OptimaJob.fetch(job.id, connection=queue_redis)
    raw = queue_redis.hgetall(job.key)
    shown = execution_record.shown(job, execution.id, raw, {})
    assert (shown.id, shown.worker_name) == (execution.id, WORKER)
    assert shown.created_at == job.started_at and shown.last_heartbeat == job.last_heartbeat
    assert execution_record.shown(job, "another", raw, {}) is None
    now = str(time.time())
    last = execution_record.shown(job, "another", raw, {b"created_at": now.encode(), b"last_heartbeat": b"1"})
    assert last.created_at.timestamp() == pytest.approx(float(now)) and last.last_heartbeat.timestamp() == 1


def test_a_burst_worker_leaves_no_execution_record_behind(queue_redis):
    job = queues.enqueue("default", "tests.jobs.sample.add", 2, 3)
    run_burst(queue_redis)
    done = OptimaJob.fetch(job.id, connection=queue_redis)
    assert done.return_value() == 5
    assert ExecutionRegistry(job.id, connection=queue_redis).get_execution_ids() == []
    assert list(queue_redis.scan_iter(match=keys.execution_key(f"{job.id}:*"))) == []
    assert queue_redis.zcard(keys.started_key("default")) == 0
    execution_id = done.latest_result().execution_id
    assert queue_redis.hget(job.key, execution_record.FIELD) == execution_id.encode()


def test_a_forking_worker_s_start_names_the_execution_and_its_worker_before_the_horse_writes_the_rest(queue_redis):
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    queue_redis.lrem(keys.queue_key("default"), 1, job.id)
    plant_started(queue_redis, job, worker_name="w-dead", execution_id="e1")  # an earlier attempt's worker
    queue_redis.zrem(keys.started_key("default"), f"{job.id}:e1")
    queue_redis.hset(job.key, "status", "queued")  # its retry, popped by the next worker
    with queue_redis.pipeline() as pipe:
        execution = Execution.create(job, 600, pipeline=pipe, worker_name=WORKER)
        execution_record.named_into(job, execution, pipe)
        assert len(pipe.command_stack) == 2  # ZADD, HSET
        pipe.execute()
    composite = f"{job.id}:{execution.id}"
    assert execution_record.owners(queue_redis, [composite]) == [WORKER]  # not w-dead: the scan leaves it alone
    assert queue_redis.hget(job.key, "status") == b"queued"  # the horse writes STARTED


def test_execution_ids_are_version_4_uuids_and_a_forked_child_makes_other_ones_than_its_parent():
    """``new_id`` takes the ``random`` module's bits, not urandom's (which lets go of the GIL): its ids must still
    be what rq's ``uuid4().hex`` makes, never repeat, and differ between a worker and the work horse it forks (the
    module's generator is seeded again in the child; one that were not would make the parent's next ids)."""
    import os
    import uuid

    ids = [execution_record.new_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for value in ids[:100]:
        parsed = uuid.UUID(hex=value)
        assert (len(value), parsed.version, parsed.variant) == (32, 4, uuid.RFC_4122), value
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover — the child: its ids through the pipe, then gone without pytest's exit
        os.write(write, " ".join(execution_record.new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    mine = [execution_record.new_id() for _ in range(3)]
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = pipe.read().split()
    assert len(theirs) == 3 and not set(theirs) & set(mine)


# --- queues.W063: a worker of a release up to 6f24d7d at work while rq's records are off ---------------------


def test_only_a_started_job_whose_hash_names_no_execution_reads_as_started_by_an_earlier_release(queue_redis):
    """A release up to 6f24d7d writes rq's execution hash only; every release since names the execution in the
    job's hash. A started entry of a finished job, an entry whose job is gone and a planted key of the wrong type
    are not that release at work."""
    earlier, this, finished, gone = (queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in range(4))
    plant_started(queue_redis, earlier, "w-old", release="last")
    plant_started(queue_redis, this, "w-new")
    plant_started(queue_redis, finished, "w-old", release="last")
    queue_redis.hset(finished.key, "status", "finished")
    plant_started(queue_redis, gone, "w-old", release="last")
    queue_redis.delete(gone.key)
    queue_redis.set(keys.started_key("low"), "planted")
    found = execution_record.started_by_earlier_release(queue_redis, ["default", "low", "high"])
    assert found == [earlier.id]


def test_w063_names_the_earlier_release_s_job_only_while_the_option_is_false(queue_redis, settings):
    job = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    assert w063(settings) == []  # nothing started
    plant_started(queue_redis, job, "w-old", release="last")
    (found,) = w063(settings)
    assert found.level == 30 and f"1 job(s), e.g. {job.id}" in found.msg  # a Warning
    assert "QUEUE_RQ_EXECUTION_RECORDS=1" in found.hint and "docs/settings.md" in found.hint
    assert w063(settings, records_on=True) == []


def test_w063_says_nothing_when_the_queues_redis_is_unreachable(settings):
    from tests.support import closed_port

    settings.QUEUES_REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"
    assert w063(settings) == []


def test_a_worker_starting_while_a_job_of_an_earlier_release_runs_warns_w063(queue_redis, start_worker):
    """rqworker runs the checks tagged ``redis``: with rq's records off (the default), its start says which job a
    worker of a release up to 6f24d7d runs, and the worker starts all the same."""
    job = queues.enqueue("content", "tests.jobs.sample.add", 1, 2)  # a queue this worker does not serve
    queue_redis.lrem(keys.queue_key("content"), 1, job.id)
    plant_started(queue_redis, job, "w-old", release="last")
    worker = start_worker("default", "--burst", "--no-fork")
    assert worker.wait(60) == 0, worker.output()
    assert "queues.W063" in worker.output() and f"1 job(s), e.g. {job.id}" in worker.output(), worker.output()


def test_w063_reads_every_redis_server_and_names_the_one_whose_job_an_earlier_release_runs(
    queue_redis, second_redis, settings
):
    """Queues on two servers (``QUEUES_REDIS_SERVERS``): the check reads each server's queues on that server."""
    job = queues.enqueue("on-b", "tests.jobs.sample.add", 1, 2)
    on_b = redis.Redis.from_url(second_redis.url)
    on_b.lrem(keys.queue_key("on-b"), 1, job.id)
    plant_started(on_b, job, "w-old", release="last")
    (found,) = w063(settings)
    assert f"127.0.0.1:{second_redis.port}" in found.msg and f"1 job(s), e.g. {job.id}" in found.msg, found.msg
    on_b.delete(keys.started_key("on-b"))
    assert w063(settings) == []
