"""The hard guarantees of batches and chains (issue 34): the windows a crash or a dropped job used to leave, each
closed and shown here with a real Redis, a real SIGKILL where a process must die at one point, and burst workers."""

import signal
import subprocess
import sys

import pytest
from django.db import transaction
from rq.registry import FailedJobRegistry

import queues
from queues.failures.operations import retry_dead_letter
from queues.keyspace import keys
from queues.models import DeadLetter, OutboxEntry
from queues.producer import outbox
from queues.testing import inline
from queues.worker.abandoned import Scan
from queues.workflows import chains
from tests.jobs.batches import lines
from tests.support import ROOT, wait_for
from tests.support.worker import plant_started, run_burst

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.jobs.batches.add"
CALLBACK = "tests.jobs.batches.callback"


def killed_at(env, call, after, code):
    """Run ``code`` in a ``manage.py shell`` child in which the ``after``+1-th call of ``call`` (``module:attribute``)
    SIGKILLs the child: it dies at that point, as a worker killed there would. -> the child's return code."""
    module, _, attribute = call.partition(":")
    script = (
        "import importlib, os, signal\n"
        f"owner = importlib.import_module({module!r})\n"
        f"real, calls = owner.{attribute}, []\n"
        "def dying(*args, **kwargs):\n"
        "    calls.append(1)\n"
        f"    if len(calls) > {after}:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(*args, **kwargs)\n"
        f"owner.{attribute} = dying\n" + code
    )
    child = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    return child.returncode


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_advance_killed_after_opening_the_next_step_moves_the_chain_on_when_it_runs_again(
    queue_redis, subprocess_env, tmp_path
):
    record = str(tmp_path / "runs.txt")
    chain = queues.chain(
        queues.call("content", ADD, record, 1),
        queues.group(queues.call("default", ADD, record, 10), queues.call("default", ADD, record, 20)),
        queues.call("default", ADD, record, 100),
        pass_result=True,
    )
    # Step 0 succeeded; its ``advance`` is SIGKILLed halfway through opening step 1: after the first of the
    # group's two jobs was enqueued, before the second (and before the step was marked advanced).
    run_burst(queue_redis, "content")  # step 0; its ``advance`` is pushed onto "default" ...
    advance_id = queues.batch_state(chain.batch_id).callbacks["on_success"]
    assert queue_redis.lrem(keys.queue_key("default"), 0, advance_id) == 1  # ... where the worker we kill took it
    code = f"from queues.workflows import chains\nchains.advance({chain.id!r}, 0, {chain.batch_id!r})\n"
    assert killed_at(subprocess_env, "queues.producer.api:enqueue_call", 1, code) == -signal.SIGKILL
    state = queues.chain_state(chain.id)
    assert (state.state, state.step, len(state.steps[1].job_ids)) == ("running", 0, 0)  # stuck, were it not re-run

    assert chains.advance(chain.id, 0, chain.batch_id) == "next"  # the re-run of the killed ``advance``
    assert chains.advance(chain.id, 0, chain.batch_id) == "done already"
    for _ in range(4):
        run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    assert (state.state, [s.state for s in state.steps]) == ("succeeded", ["succeeded"] * 3)
    assert sorted(lines(record)) == ["add 1 0", "add 10 1", "add 100 32", "add 20 1"]  # each call once


def test_a_member_buried_by_the_abandoned_scan_is_counted_with_its_burial_even_if_the_scan_is_killed_after_it(
    queue_redis, subprocess_env, tmp_path, settings
):
    settings.OPTIMA_QUEUES = {**settings.OPTIMA_QUEUES, "default": {"attempts": 1}}
    record = str(tmp_path / "runs.txt")
    with queues.batch(
        on_complete=queues.call("default", CALLBACK, record, "complete"),
        on_death=queues.call("default", CALLBACK, record, "death"),
    ) as b:
        job = queues.enqueue("default", ADD, record, 1, attempts=1)
    queue_redis.lrem(keys.queue_key("default"), 0, job.id)
    plant_started(queue_redis, job)  # its worker was SIGKILLed while running it: no attempt left
    # The scan that buries it is SIGKILLed just after the burial (before the hooks' ``after_dead``).
    code = "from queues.connection.clients import get_connection\nfrom queues.worker.abandoned import Scan\n"
    code += "Scan(get_connection(), ['default'], stale_after=0).run()\n"
    assert killed_at(subprocess_env, "queues.events.hooks:after_dead", 0, code) == -signal.SIGKILL
    assert queues.fetch_job(job.id).get_status() == "failed"  # buried

    state = queues.batch_state(b.id)
    assert (state.state, state.dead, state.pending) == ("completed_with_dead", 1, 0)
    Scan(queue_redis, ["default"], stale_after=0).run()  # the next scan finds the job buried: it only drops the entry
    assert (queues.batch_state(b.id).dead, queues.batch_state(b.id).state) == (1, "completed_with_dead")
    run_burst(queue_redis)
    assert sorted(lines(record)) == [f"complete {b.id} 0 1", f"death {b.id} 0 1"]  # each once


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_member_with_result_ttl_0_is_counted(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        kept = queues.enqueue("default", ADD, record, 1)
        forgotten = queues.enqueue("default", ADD, record, 2)
    queue_redis.hset(forgotten.key, "result_ttl", 0)  # not kept after its success (not a signed field)
    run_burst(queue_redis)
    assert queues.fetch_job(forgotten.id) is None and queues.fetch_job(kept.id) is not None  # rq deleted it
    state = queues.batch_state(b.id)
    assert (state.state, state.finished, state.pending) == ("succeeded", 2, 0)
    assert lines(record)[-1] == f"success {b.id} 2 0"


@pytest.mark.slow
@pytest.mark.parametrize("kind", [("--no-fork",), ("--concurrency", "2")], ids=["no-fork", "concurrency"])
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_member_with_result_ttl_0_is_counted_by_every_kind_of_worker(start_worker, queue_redis, tmp_path, kind):
    record = str(tmp_path / "runs.txt")
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        forgotten = queues.enqueue("default", ADD, record, 2)
        queue_redis.hset(forgotten.key, "result_ttl", 0)
    start_worker("default", *kind)
    wait_for(lambda: f"success {b.id} 1 0" in lines(record), timeout=60, message="on_success to run")
    assert queues.fetch_job(forgotten.id) is None
    assert queues.batch_state(b.id).state == "succeeded"


def test_a_unique_duplicate_dropped_at_the_commit_leaves_the_batch_which_does_not_wait_for_it(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    with transaction.atomic():
        # At the commit, before the batch's member is written, another job of its unique key is enqueued first.
        transaction.on_commit(lambda: queues.enqueue("default", ADD, record, 9, unique="seller-1"))
        with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
            queues.enqueue("default", ADD, record, 1)
            dropped = queues.enqueue("default", ADD, record, 2, unique="seller-1")
    assert queues.fetch_job(dropped.id) is None  # never written: the key's job was waiting
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.pending, state.canceled) == ("running", 1, 1, 1)
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.finished) == ("succeeded", 1, 1)
    assert sorted(lines(record)) == ["add 1 0", "add 9 0", f"success {b.id} 1 0"]


def test_a_unique_duplicate_dropped_by_the_outbox_relay_after_the_seal_leaves_the_batch(
    queue_redis, tmp_path, monkeypatch
):
    record = str(tmp_path / "runs.txt")
    monkeypatch.setattr(outbox, "PUSH_GRACE", 0.0)  # the commit's push checks its claim: a relay took the row
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        queues.enqueue("default", ADD, record, 1)
        with transaction.atomic():
            dropped = queues.enqueue("default", ADD, record, 2, unique="seller-1")
            OutboxEntry.objects.filter(job_id=dropped.id).update(claimed_by="a-relay-that-died")
    queues.enqueue("default", ADD, record, 9, unique="seller-1")  # the key's job, waiting when the relay pushes
    assert queues.batch_state(b.id).pending == 2
    OutboxEntry.objects.filter(job_id=dropped.id).update(claimed_by="", claimed_until=None)
    assert outbox.relay() == (1, 0)
    assert queues.fetch_job(dropped.id) is None
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.finished) == ("succeeded", 1, 1)
    assert sorted(lines(record)) == ["add 1 0", "add 9 0", f"success {b.id} 1 0"]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_member_canceled_inside_its_block_before_the_seal_leaves_the_batch(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        queues.enqueue("default", ADD, record, 1)
        assert queues.cancel(queues.enqueue("default", ADD, record, 2).id).ok  # it had not joined yet
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.finished) == ("succeeded", 1, 1)
    assert sorted(lines(record)) == ["add 1 0", f"success {b.id} 1 0"]


def forget(connection, job_id):
    """The dead job leaves Redis (its failure_ttl ran out, or someone deleted it): its dead letter is all there is."""
    connection.zrem(FailedJobRegistry("default", connection=connection).key, job_id)
    connection.delete(keys.job_key(job_id))


def test_a_dead_letter_retried_as_a_new_job_takes_its_place_in_the_batch(queue_redis, tmp_path):
    record, flag = str(tmp_path / "runs.txt"), tmp_path / "flag"
    with queues.batch(
        on_success=queues.call("default", CALLBACK, record, "success"),
        on_complete=queues.call("default", CALLBACK, record, "complete"),
    ) as b:
        queues.enqueue("default", ADD, record, 1)
        dead = queues.enqueue("default", "tests.jobs.batches.fail_until", record, str(flag))
    run_burst(queue_redis)
    assert (queues.batch_state(b.id).state, queues.batch_state(b.id).dead) == ("completed_with_dead", 1)
    forget(queue_redis, dead.id)

    flag.write_text("ok")
    outcome = retry_dead_letter(DeadLetter.objects.get(job_id=dead.id).pk)
    assert outcome.outcome == "ok" and outcome.job_id != dead.id  # a new job
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.finished, state.dead) == ("succeeded", 2, 2, 0)
    assert sorted(line.split()[0] for line in lines(record)) == ["add", "complete", "recovered", "success"]


def test_a_chain_stopped_at_a_dead_letter_retried_as_a_new_job_goes_on(queue_redis, tmp_path):
    record, flag = str(tmp_path / "runs.txt"), tmp_path / "flag"
    chain = queues.chain(
        queues.call("default", "tests.jobs.batches.fail_until", record, str(flag)),
        queues.call("default", ADD, record, 100),
    )
    run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    assert state.state == "stopped"
    forget(queue_redis, state.steps[0].job_ids[0])

    flag.write_text("ok")
    assert retry_dead_letter(DeadLetter.objects.get(job_id=state.steps[0].job_ids[0]).pk).outcome == "ok"
    for _ in range(3):
        run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    assert (state.state, [s.state for s in state.steps]) == ("succeeded", ["succeeded", "succeeded"])
    assert lines(record) == ["recovered", "add 100 0"]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_under_inline_a_chain_passes_results(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    with inline():
        chain = queues.chain(
            queues.call("default", ADD, record, 1),
            queues.group(queues.call("default", ADD, record, 10), queues.call("default", ADD, record, 20)),
            queues.call("default", ADD, record, 100),
            pass_result=True,
        )
    assert lines(record) == ["add 1 0", "add 10 1", "add 20 1", "add 100 32"]
    assert queues.chain_state(chain.id).state == "succeeded"


def test_a_batch_completed_with_dead_and_its_stopped_chain_are_kept_as_long_as_the_dead_letter(
    queue_redis, tmp_path, settings
):
    settings.OPTIMA_QUEUES = {**settings.OPTIMA_QUEUES, "default": {"failure_ttl": 7 * 86400}}
    record, flag = str(tmp_path / "runs.txt"), tmp_path / "flag"
    chain = queues.chain(
        queues.call("default", "tests.jobs.batches.fail_until", record, str(flag)),
        queues.call("default", ADD, record, 100),
    )
    run_burst(queue_redis)
    assert queues.chain_state(chain.id).state == "stopped"
    on_success = queues.batch_state(chain.batch_id).callbacks["on_success"]
    for key in (keys.batch_key(chain.batch_id), keys.batch_key(chain.batch_id, "dead"), keys.chain_key(chain.id)):
        assert 6 * 86400 < queue_redis.ttl(key) <= 7 * 86400, key  # the dead letter's retention, not forever
    assert 6 * 86400 < queue_redis.ttl(keys.job_key(on_success)) <= 7 * 86400  # the callback that waits, too

    flag.write_text("ok")  # retried within the retention: the chain goes on, its keys kept until it ends
    dead_id = queues.chain_state(chain.id).steps[0].job_ids[0]
    assert retry_dead_letter(DeadLetter.objects.get(job_id=dead_id).pk).outcome == "ok"
    run_burst(queue_redis)
    assert 0 < queue_redis.ttl(keys.chain_key(chain.id)) < 6 * 86400  # ended: the result retention
    state = queues.chain_state(chain.id)
    assert (state.state, lines(record)) == ("succeeded", ["recovered", "add 100 0"])


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_batch_completed_with_dead_whose_dead_letter_is_kept_forever_is_kept_too(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        queues.enqueue("default", "tests.jobs.batches.fail_until", record, str(tmp_path / "flag"))
    run_burst(queue_redis)
    assert queues.batch_state(b.id).state == "completed_with_dead"
    assert queue_redis.ttl(keys.batch_key(b.id)) == -1  # failure_ttl -1 (the default): no expiry


def test_advance_killed_after_the_next_step_was_sealed_and_ran_does_not_run_it_again(
    queue_redis, subprocess_env, tmp_path
):
    record = str(tmp_path / "runs.txt")
    chain = queues.chain(
        queues.call("default", ADD, record, 1),
        queues.call("content", ADD, record, 10),
        queues.call("default", ADD, record, 100),
    )
    run_burst(queue_redis, "default")  # step 0; its ``advance`` is pushed onto "content" (step 1's queue) ...
    advance_id = queues.batch_state(chain.batch_id).callbacks["on_success"]
    assert queue_redis.lrem(keys.queue_key("content"), 0, advance_id) == 1  # ... where the worker we kill took it
    # Killed when marking step 0 advanced: step 1 was made whole.
    code = f"from queues.workflows import chains\nchains.advance({chain.id!r}, 0, {chain.batch_id!r})\n"
    assert killed_at(subprocess_env, "redis.client:Redis.hsetnx", 0, code) == -signal.SIGKILL
    run_burst(queue_redis, "content")  # step 1 runs; its batch succeeds ...
    queue_redis.delete(keys.job_key(chains.step_id(chain.id, 1, 0)))  # ... and its hash is gone before the re-run
    assert chains.advance(chain.id, 0, chain.batch_id) == "next"  # the re-run of step 0's ``advance``
    for _ in range(2):
        run_burst(queue_redis, "default", "content")
    assert lines(record) == ["add 1 0", "add 10 0", "add 100 0"]  # step 1 ran once
    assert queues.chain_state(chain.id).state == "succeeded"
