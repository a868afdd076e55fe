"""A job too large to run never makes a worker inflate it or read it whole, and none is enqueued
(queues/keyspace/entries.py ``too_large``, ``entries.RUN_BYTES``).

Whoever can write to the queues' Redis plants a job whose ``data`` is a zlib bomb (64 KiB that inflate to 64 MiB:
rq's ``Job.restore`` inflates it whole, and a bomb a thousand times larger kills the worker for its memory, and
the next one after the abandoned-job scan put it back), or a hash of 40 MiB. Each is planted, then a real worker
runs: the job is dead-lettered ``corrupt`` "too large to run", nothing of it inflated or sent whole (Redis's own
count of the bytes it sent), and a good job queued behind runs. ``queues.enqueue`` refuses what a worker would.
"""

import json

import pytest

import queues
from queues.exceptions import InvalidJob
from queues.keyspace import entries, keys
from queues.models import DeadLetter
from tests.jobs import sample
from tests.session_env import PREFIX
from tests.support.worker import MIB, bomb, plant, run_burst

pytestmark = pytest.mark.django_db(transaction=True)


def sent_bytes(connection):
    return connection.info("stats")["total_net_output_bytes"]


def assert_refused_too_large(connection, job_id, *words):
    row = DeadLetter.objects.get(job_id=job_id)
    assert (row.reason, row.queue) == ("corrupt", "default"), (row.reason, row.exc_message)
    assert "too large to run" in row.exc_message and all(word in row.exc_message for word in words), row.exc_message
    assert connection.zscore(keys.failed_key("default"), job_id) == float("inf")
    assert connection.exists(keys.job_key(job_id))  # kept as it was, for the operator
    assert connection.llen(keys.intermediate_key(keys.queue_key("default"))) == 0


def assert_ran(connection, job):
    job.refresh()
    assert job.get_status() == "finished" and job.return_value() == 5


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--no-fork"], ["--concurrency", "4"], []], ids=["no-fork", "concurrency", "fork"])
def test_a_zlib_bomb_planted_in_a_queue_is_dead_lettered_corrupt_uninflated_and_the_worker_goes_on(
    start_worker, queue_redis, how
):
    data = bomb(64)
    assert len(data) < MIB  # 64 MiB inflated
    planted = plant(queue_redis, "tests.jobs.sample.add", [1], data=data)
    good = queues.enqueue("default", sample.add, 2, 3)
    process = start_worker("default", "--burst", *how)
    assert process.wait(60) == 0, process.output()
    assert_refused_too_large(queue_redis, planted, f"its data inflates past {entries.RUN_BYTES} bytes")
    assert_ran(queue_redis, good)
    assert "Traceback" not in process.output()


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--no-fork"], []], ids=["no-fork", "fork"])
def test_a_hash_of_40_mib_planted_in_a_queue_never_crosses_the_wire_to_the_worker(start_worker, queue_redis, how):
    planted = plant(queue_redis, "tests.jobs.sample.add", [1], description=b"d" * (40 * MIB))
    good = queues.enqueue("default", sample.add, 2, 3)
    before = sent_bytes(queue_redis)
    process = start_worker("default", "--burst", *how)
    assert process.wait(60) == 0, process.output()
    assert sent_bytes(queue_redis) - before < 4 * MIB  # the pop, the worker's read and its dead letter: none whole
    assert_refused_too_large(queue_redis, planted, "its hash holds")
    assert_ran(queue_redis, good)


def test_the_forking_workers_pop_of_a_bomb_refuses_it_in_the_process(queue_redis):
    planted = plant(queue_redis, "tests.jobs.sample.add", [1], data=bomb(20))
    good = queues.enqueue("default", sample.add, 2, 3)
    run_burst(queue_redis)
    assert_refused_too_large(queue_redis, planted, "inflates")
    assert_ran(queue_redis, good)


def test_too_large_says_nothing_of_a_job_a_producer_wrote_and_names_each_cap(queue_redis):
    job = queues.enqueue("default", sample.add, 2, "x" * MIB)
    fields = queue_redis.hgetall(job.key)
    assert entries.too_large(fields) is None
    assert "inflates past" in entries.too_large({**fields, b"data": bomb(17)})
    not_zlib = json.dumps(["tests.jobs.sample.add", None, ["a" * (17 * MIB)], {}]).encode()
    assert "inflates past" in entries.too_large({**fields, b"data": not_zlib})  # rq reads it as it is
    assert entries.too_large({**fields, b"data": not_zlib[: 15 * MIB]}) is None
    assert "1025 fields" in entries.too_large({str(i).encode(): b"" for i in range(entries.JOB_FIELDS + 1)})
    assert "holds" in entries.too_large({**fields, b"description": b"d" * entries.RUN_STORED_BYTES})


def test_queues_enqueue_refuses_a_job_larger_than_a_worker_runs_and_writes_nothing(queue_redis):
    written = set(queue_redis.keys(f"{PREFIX}:*"))  # this process's: the other test processes share the server
    with pytest.raises(InvalidJob) as refused:
        queues.enqueue("default", sample.add, 2, "x" * (16 * MIB))
    message = str(refused.value)
    assert message.startswith("queues.enqueue('default', 'tests.jobs.sample.add', ...): ")
    assert f"more than {entries.RUN_BYTES} (16 MiB)" in message and "pass its id" in message
    with pytest.raises(InvalidJob, match=r"queues.enqueue_many\('default', 'tests.jobs.sample.add', ...\)"):
        queues.enqueue_many("default", sample.add, [(2, 3), (2, "x" * (16 * MIB))])
    assert set(queue_redis.keys(f"{PREFIX}:*")) == written  # not even the first job of the many
    assert queues.enqueue("default", sample.add, 2, "x" * (15 * MIB)).get_status() == "queued"  # under the cap
