"""Batches through real worker processes (issue 34, section 6): each callback exactly once with many members
finishing at once on two concurrent workers, and a member SIGKILLed after its work, before its success was
recorded, counted once when it runs again."""

import signal
from collections import Counter

import pytest

import queues
from tests.jobs.batches import lines
from tests.support import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MEMBER = "tests.jobs.batches.member"
CALLBACK = "tests.jobs.batches.callback"


def states(ids):
    return [queues.batch_state(batch_id).state for batch_id in ids]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_each_callback_runs_exactly_once_with_many_members_on_two_concurrent_workers(start_worker, tmp_path):
    record = str(tmp_path / "runs.txt")
    batches = []
    for n in range(20):  # the 200 members x 20 runs, side by side: 20 "last member" races, 16 threads
        with queues.batch(
            on_success=queues.call("default", CALLBACK, record, "success"),
            on_complete=queues.call("default", CALLBACK, record, "complete"),
        ) as b:
            queues.enqueue_many("default", MEMBER, [(record, f"{n}-{i}") for i in range(190)])
            for i in range(190, 200):
                queues.enqueue("default", MEMBER, record, f"{n}-{i}")
        batches.append(b.id)
    for _ in range(2):
        start_worker("default", "--concurrency", "8")

    wait_for(lambda: states(batches) == ["succeeded"] * 20, timeout=180, message="the 20 batches to succeed")
    wait_for(
        lambda: len([line for line in lines(record) if not line.startswith("member")]) >= 40,
        timeout=60,
        message="the 40 callbacks to run",
    )
    fired = Counter(tuple(line.split()[:2]) for line in lines(record) if not line.startswith("member"))
    assert fired == {(kind, batch_id): 1 for batch_id in batches for kind in ("success", "complete")}
    assert {tuple(line.split()[2:]) for line in lines(record) if not line.startswith("member")} == {("200", "0")}
    for batch_id in batches:
        state = queues.batch_state(batch_id)
        assert (state.total, state.finished, state.pending, state.dead) == (200, 200, 0, 0)


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_member_killed_after_its_work_runs_again_and_counts_once(start_worker, tmp_path):
    record, work = str(tmp_path / "runs.txt"), str(tmp_path / "work.txt")
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        queues.enqueue("default", "tests.jobs.batches.worked_then_hang", work, 120, attempts=3)
        queues.enqueue("default", MEMBER, record, 1)
    victim = start_worker("default", "--no-fork")
    wait_for(lambda: "worked" in lines(work), timeout=60, message="the member to do its work")
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    assert queues.batch_state(b.id).state == "running"
    start_worker("default", "--no-fork")

    wait_for(lambda: queues.batch_state(b.id).state == "succeeded", timeout=120, message="the batch to succeed")
    wait_for(lambda: [x for x in lines(record) if x.startswith("success")], timeout=60, message="on_success to run")
    assert lines(work) == ["worked", "worked"]  # at least once: the work ran again
    state = queues.batch_state(b.id)
    assert (state.total, state.finished) == (2, 2)
    assert [x for x in lines(record) if x.startswith("success")] == [f"success {b.id} 2 0"]


def test_a_batch_survives_a_redis_restart_mid_batch_and_fires_once(outage_redis, start_worker, tmp_path):
    server, client = outage_redis(durable=True)  # AOF: what Redis keeps, the batch keeps
    record, flag = str(tmp_path / "runs.txt"), tmp_path / "flag"
    with queues.batch(on_success=queues.call("default", CALLBACK, record, "success")) as b:
        queues.enqueue("default", "tests.jobs.batches.wait_for_file", str(flag))
        queues.enqueue_many("default", MEMBER, [(record, i) for i in range(10)])
    start_worker("default", "--concurrency", "4", env={"REDIS_URL": server.url})
    wait_for(lambda: queues.batch_state(b.id).finished == 10, timeout=60, message="the 10 quick members to finish")

    server.stop()
    server.start()
    flag.write_text("go")  # the last member finishes once Redis is back

    wait_for(lambda: queues.batch_state(b.id).state == "succeeded", timeout=90, message="the batch to succeed")
    wait_for(lambda: [x for x in lines(record) if x.startswith("success")], timeout=60, message="on_success to run")
    assert [x for x in lines(record) if x.startswith("success")] == [f"success {b.id} 11 0"]
    assert (queues.batch_state(b.id).total, queues.batch_state(b.id).finished) == (11, 11)


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_chain_with_a_group_step_runs_through_a_concurrent_worker(start_worker, tmp_path):
    record = str(tmp_path / "runs.txt")
    add = "tests.jobs.batches.add"
    chain = queues.chain(
        queues.call("default", add, record, 1),
        queues.group(*(queues.call("default", add, record, 10 * i) for i in range(1, 6))),
        queues.call("content", add, record, 1000),
        pass_result=True,
    )
    start_worker("default", "content", "--concurrency", "4")
    wait_for(lambda: queues.chain_state(chain.id).state == "succeeded", timeout=90, message="the chain to succeed")
    assert lines(record)[-1] == "add 1000 155"  # the group's five values: 11 + 21 + 31 + 41 + 51
    assert len(lines(record)) == 7
