"""No Redis entry stops a worker or a scheduler, and none forges a log line (issue 19, findings 1 and 5).

Whoever can write to the queues' Redis plants: a job whose ``signature`` is not ASCII
(``hmac.compare_digest`` raises on it), limit keys of another type than rq's, a workers set or a
scheduled registry that is a string, a job id with a line break in it. Each is planted, then a real
``manage.py rqworker`` or ``rqscheduler`` runs: it does not exit, a good job queued behind runs, the
bad entry is refused or renamed aside (``queues.keyspace.quarantine``) with one ERROR naming it, and no line
of the process's output starts with text the entry chose.
"""

import logging
import re
import uuid

import pytest
from rq.worker_registration import REDIS_WORKER_KEYS

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.failures.deadletter import decode_raw_hash
from queues.jobs import gate, signing
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.periodic.plan import scheduled_jobs_key
from queues.worker.adapter import OptimaWorker
from tests.jobs import sample
from tests.support import wait_for
from tests.support.lifecycle import WORKER_ENV

pytestmark = pytest.mark.django_db(transaction=True)

FORGED = "2026-12-01 13.00.00,000 CRITICAL forged"


def plant(connection, *, queue="default", **fields):
    """A signed job of ``sample.add(2, 3)`` pushed onto ``queue``, its hash fields then overwritten
    with ``fields`` (Redis commands only); -> its id."""
    job = OptimaJob.create(
        "tests.jobs.sample.add",
        args=[2, 3],
        connection=connection,
        id=f"planted-{uuid.uuid4().hex[:8]}",
        origin=queue,
        meta={"queue": queue, "attempt": 1, "attempts_allowed": 5},
    )
    job.signature = signing.sign(job)
    job.save()
    if fields:
        connection.hset(job.key, mapping=fields)
    connection.rpush(keys.queue_key(queue), job.id)
    return job.id


def ran(connection, job):
    fetched = OptimaJob.fetch(job.id, connection=connection)
    return fetched.get_status() == "finished" and fetched.return_value() == 5


def aside(connection, key):
    """The keys ``key`` was renamed to (``<key>.corrupt-<unix time>``)."""
    return [k.decode() for k in connection.keys(f"{key}.corrupt-*")]


def errors_naming(output, key):
    return [line for line in output.splitlines() if "ERROR" in line and key in line]


def burst(start_worker, *args, env=None, command="rqworker"):
    process = start_worker(*args, "--burst", env=env, command=command)
    assert process.wait(60) == 0, process.output()
    return process.output()


# -- 1. the gate: a signature that is not ASCII, any exception of the gate ------------------------


@pytest.mark.slow
def test_a_job_whose_signature_is_not_ascii_is_dead_lettered_corrupt_and_the_worker_goes_on(start_worker, queue_redis):
    planted = [plant(queue_redis, signature="\xff" * 64), plant(queue_redis, signature="é" * 32)]
    raw = {job_id: queue_redis.hgetall(keys.job_key(job_id)) for job_id in planted}
    good = queues.enqueue("default", sample.add, 2, 3)
    burst(start_worker, "default")
    assert ran(queue_redis, good)
    for job_id in planted:
        row = DeadLetter.objects.get(job_id=job_id)
        assert (row.reason, row.queue) == ("corrupt", "default")
        assert dict(decode_raw_hash(row.raw_hash)) == raw[job_id]
        assert queue_redis.hgetall(keys.job_key(job_id)) == raw[job_id]  # kept as it was
        assert queue_redis.zscore(keys.failed_key("default"), job_id) == float("inf")


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_signing_verify_says_no_to_a_signature_that_is_not_ascii_instead_of_raising(queue_redis):
    job = OptimaJob.fetch(plant(queue_redis, signature="é" * 32), connection=queue_redis)
    assert signing.verify(job) is False


def test_any_exception_of_the_gate_refuses_the_job_as_corrupt_and_the_worker_goes_on(queue_redis, monkeypatch):
    planted = plant(queue_redis)
    good = queues.enqueue("default", sample.add, 2, 3)
    vet = gate.vet

    def vet_raising_for_the_planted_job(job, queue_name):
        if job.id == planted:
            raise LookupError("whatever the gate ran into")
        return vet(job, queue_name)

    monkeypatch.setattr(gate, "vet", vet_raising_for_the_planted_job)
    worker = OptimaWorker([get_queue("default", connection=queue_redis)], connection=queue_redis)
    worker.work(burst=True, with_scheduler=False)
    assert ran(queue_redis, good)
    row = DeadLetter.objects.get(job_id=planted)
    assert row.reason == "corrupt" and "LookupError" in row.exc_message
    assert queue_redis.llen(keys.intermediate_key(keys.queue_key("default"))) == 0


# -- 2. limit keys of the wrong type -----------------------------------------------------------------


@pytest.mark.slow
def test_limit_keys_of_the_wrong_type_are_set_aside_with_one_error_and_the_worker_goes_on(start_worker, queue_redis):
    limited = queues.enqueue("default", sample.add, 2, 3, limit_key="seller:1", limit_concurrency=1)
    queue_redis.hset(limited.key, "signature", "0" * 64)  # refused (unsigned): its slot is then released
    scoped = limited.rate_limit_key
    planted = [keys.limit_config_key(scoped), keys.limit_allowed_key(scoped), keys.limit_held_key(scoped)]
    for key in planted:
        queue_redis.delete(key)
        queue_redis.set(key, "poison")
    queue_redis.srem(keys.limit_keys_key(), scoped)  # unknown to rq's maintenance: met by the release itself
    good = queues.enqueue("default", sample.add, 2, 3)
    output = burst(start_worker, "default", "--without-scheduler")
    assert ran(queue_redis, good)
    assert DeadLetter.objects.get(job_id=limited.id).reason == "unsigned"
    for key in planted:
        assert len(aside(queue_redis, key)) == 1, output
        assert queue_redis.get(aside(queue_redis, key)[0]) == b"poison"
        assert len(errors_naming(output, key + " ")) == 1, output


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_release_of_a_job_whose_limit_keys_hold_no_number_skips_it_with_an_error(queue_redis, caplog):
    from queues.producer import limits

    limited = queues.enqueue("default", sample.add, 2, 3, limit_key="seller:2", limit_concurrency=1)
    queue_redis.hset(keys.limit_config_key(limited.rate_limit_key), "concurrency", "many")
    queue_redis.hset(limited.key, "status", "failed")
    with caplog.at_level(logging.ERROR):
        assert limits.release(OptimaJob.fetch(limited.id, connection=queue_redis)) == []
    assert [r.levelno for r in caplog.records if limited.rate_limit_key in r.getMessage()] == [logging.ERROR]


# -- 3. rq's own entry points: registration, maintenance, the schedulers ----------------------------


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_workers_set_that_is_a_string_is_set_aside_and_the_worker_starts_and_runs_jobs(start_worker, queue_redis):
    queue_redis.set(REDIS_WORKER_KEYS, "poison")
    good = queues.enqueue("default", sample.add, 2, 3)
    output = burst(start_worker, "default", "--without-scheduler")
    assert ran(queue_redis, good)
    assert [queue_redis.get(k) for k in aside(queue_redis, REDIS_WORKER_KEYS)] == [b"poison"]
    assert len(errors_naming(output, REDIS_WORKER_KEYS + " ")) == 1, output


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_registry_of_the_wrong_type_is_set_aside_by_maintenance_and_the_worker_goes_on(start_worker, queue_redis):
    failed = keys.failed_key("default")
    queue_redis.set(failed, "poison")
    good = queues.enqueue("default", sample.add, 2, 3)
    output = burst(start_worker, "default", "--without-scheduler")
    assert ran(queue_redis, good)
    assert [queue_redis.get(k) for k in aside(queue_redis, failed)] == [b"poison"]
    assert len(errors_naming(output, failed + " ")) == 1, output
    assert "maintenance failed" not in output


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_scheduled_registry_of_the_wrong_type_does_not_stop_rqs_scheduler_in_the_worker(start_worker, queue_redis):
    scheduled = keys.scheduled_key("default")
    queue_redis.set(scheduled, "poison")
    good = queues.enqueue("default", sample.add, 2, 3)
    output = burst(start_worker, "default")  # with RQ's scheduler: in burst mode it moves due jobs once
    assert ran(queue_redis, good)
    assert [queue_redis.get(k) for k in aside(queue_redis, scheduled)] == [b"poison"]
    assert len(errors_naming(output, scheduled + " ")) == 1, output


@pytest.mark.slow
def test_due_jobs_rqs_scheduler_cannot_read_are_dead_lettered_and_the_others_move(start_worker, queue_redis):
    scheduled = keys.scheduled_key("default")
    planted = plant(queue_redis)
    queue_redis.delete(keys.queue_key("default"))
    queue_redis.rename(keys.job_key(planted), keys.job_key("bad.id"))  # an id rq rejects, with a hash to keep
    delayed = queues.enqueue("default", sample.add, 2, 3, delay=3600)
    queue_redis.zadd(scheduled, {"bad.id": 0, b"\xff-not-utf8": 0, delayed.id: 0})  # all three due
    output = burst(start_worker, "default")
    assert ran(queue_redis, delayed)
    assert DeadLetter.objects.get(job_id="bad.id").reason == "corrupt"
    assert queue_redis.zrange(scheduled, 0, -1) == []
    assert len([line for line in output.splitlines() if "ERROR" in line and "xff-not-utf8" in line]) == 1, output


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_scheduled_registry_of_the_wrong_type_does_not_stop_the_scheduler_process_of_a_worker(
    start_worker, queue_redis
):
    scheduled = keys.scheduled_key("default")
    queue_redis.set(scheduled, "poison")
    worker = start_worker("default")  # RQ's scheduler runs as a child process of the worker
    wait_for(lambda: aside(queue_redis, scheduled), timeout=30, message="the scheduled registry set aside")
    delayed = queues.enqueue("default", sample.add, 2, 3, delay=1)
    wait_for(lambda: ran(queue_redis, delayed), timeout=30, message="the delayed job to run")
    output = worker.output()
    assert worker.stop() == 0
    assert len(errors_naming(output, scheduled + " ")) == 1, output


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_rqscheduler_sets_aside_a_schedule_set_of_the_wrong_type_and_registers_the_schedules(
    start_worker, queue_redis, lifecycle_schedules
):
    key = scheduled_jobs_key()
    queue_redis.set(key, "poison")
    output = burst(start_worker, env=WORKER_ENV, command="rqscheduler")
    assert [queue_redis.get(k) for k in aside(queue_redis, key)] == [b"poison"]
    assert sorted(m.decode() for m in queue_redis.zrange(key, 0, -1)) == ["schedule-nightly", "schedule-tick"]
    assert len(errors_naming(output, key + " ")) == 1, output


def in_process_worker(connection):
    worker = OptimaWorker([get_queue("default", connection=connection)], connection=connection)
    worker.register_birth()
    return worker


def poison(connection, key):
    connection.delete(key)
    connection.set(key, "poison")


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_records_its_state_when_its_hash_was_turned_into_a_string(queue_redis):
    worker = in_process_worker(queue_redis)
    poison(queue_redis, worker.key)
    worker.set_state("idle")
    assert [queue_redis.get(k) for k in aside(queue_redis, worker.key)] == [b"poison"]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_job_starts_and_heartbeats_when_the_started_registry_was_turned_into_a_string(queue_redis):
    worker = in_process_worker(queue_redis)
    job = OptimaJob.fetch(queues.enqueue("default", sample.add, 2, 3).id, connection=queue_redis)
    started = keys.started_key("default")
    poison(queue_redis, started)
    execution = worker.prepare_execution(job)
    assert queue_redis.zscore(started, execution.composite_key) is not None  # recorded after all
    assert len(aside(queue_redis, started)) == 1
    poison(queue_redis, started)
    worker.maintain_heartbeats(job, execution)
    assert len(aside(queue_redis, started)) == 2  # set aside twice within a second: the second name has a suffix


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_settles_a_job_whose_horse_ended_when_the_started_registry_was_turned_into_a_string(queue_redis):
    from queues.worker import settle

    worker = in_process_worker(queue_redis)
    job = OptimaJob.fetch(queues.enqueue("default", sample.add, 2, 3).id, connection=queue_redis)
    execution = worker.prepare_execution(job)
    poison(queue_redis, keys.started_key("default"))
    settle.settle(
        worker,
        settle.Ended(
            job,
            get_queue("default", connection=queue_redis),
            execution,
            pid=0,
            wait_status=None,
            rusage=None,
            interrupted=None,
        ),
    )
    assert len(aside(queue_redis, keys.started_key("default"))) == 1


# -- 4. log lines a job id cannot forge ------------------------------------------------------------


@pytest.mark.slow
def test_no_line_a_worker_writes_starts_with_text_a_job_id_chose(start_worker, queue_redis):
    with_hash = f"evil\n{FORGED}"  # dead-lettered as corrupt: logged by queues.deadletter
    without_hash = f"gone\n{FORGED} too"  # dropped: logged by rq.worker
    queue_redis.hset(keys.job_key(with_hash), mapping={"data": b"x", "origin": "default", "status": "queued"})
    queue_redis.rpush(keys.queue_key("default"), with_hash, without_hash)
    good = queues.enqueue("default", sample.add, 2, 3)
    output = burst(start_worker, "default", "--without-scheduler")
    assert ran(queue_redis, good)
    real_record = re.compile(r"\d{4}-\d\d-\d\d \d\d:")  # a line the formatter began: its time, then the message
    assert [line for line in output.splitlines() if FORGED in line and not real_record.match(line)] == []
    assert f"evil\\n{FORGED}" in output and f"gone\\n{FORGED}" in output  # both were logged, escaped
    assert DeadLetter.objects.get(job_id=with_hash).reason == "corrupt"


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_traceback_keeps_its_lines_and_a_line_break_in_a_value_is_escaped():
    from queues import logsafe

    record = logging.LogRecord("rq.worker", logging.ERROR, __file__, 1, "job %s: failed\n%s", None, None)
    try:
        raise ValueError(f"No such job: evil\n{FORGED}")
    except ValueError as exc:
        record.args = (f"evil\n{FORGED}", 'Traceback (most recent call last):\n  File "x", line 1\nKeyError: k\n')
        record.exc_info = (type(exc), exc, exc.__traceback__)
    logsafe.EscapeControlCharacters().filter(record)
    text = logging.Formatter("%(levelname)s %(message)s").format(record)
    lines = text.splitlines()
    assert lines[:4] == [
        f"ERROR job evil\\n{FORGED}: failed",
        "Traceback (most recent call last):",
        '  File "x", line 1',
        "KeyError: k",
    ]
    assert lines[-1] == f"ValueError: No such job: evil\\n{FORGED}" and lines.count(lines[1]) == 2
    assert [line for line in lines if line.startswith(FORGED)] == []
