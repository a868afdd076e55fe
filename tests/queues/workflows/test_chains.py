"""Chains and groups (issue 34, section 2) with a real Redis and a burst worker in this process."""

import pytest

import queues
from queues.failures.operations import discard_dead_letter, retry_dead_letter
from queues.models import DeadLetter
from tests.jobs.batches import lines
from tests.support.worker import run_burst

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "tests.jobs.batches.add"


def test_a_chain_runs_its_steps_in_order_passing_each_result_and_a_group_as_a_list(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    chain = queues.chain(
        queues.call("default", ADD, record, 1),
        queues.group(queues.call("default", ADD, record, 10), queues.call("content", ADD, record, 20)),
        queues.call("default", ADD, record, 100),
        pass_result=True,
    )
    assert [s.state for s in queues.chain_state(chain.id).steps] == ["running", "waiting", "waiting"]
    for _ in range(4):  # each burst runs what the step before enqueued
        run_burst(queue_redis, "default", "content")
    state = queues.chain_state(chain.id)
    assert (state.state, [s.state for s in state.steps]) == ("succeeded", ["succeeded"] * 3)
    assert lines(record)[0] == "add 1 0"
    assert sorted(lines(record)[1:3]) == ["add 10 1", "add 20 1"]  # the group: side by side, each given 1
    assert lines(record)[3] == "add 100 32"  # given the group's [11, 21]
    last = queues.fetch_job(state.steps[2].job_ids[0])
    assert last.return_value() == 132


def test_a_dead_step_stops_the_chain_and_its_retry_carries_it_on(queue_redis, tmp_path):
    record, flag = str(tmp_path / "runs.txt"), tmp_path / "flag"
    chain = queues.chain(
        queues.call("default", ADD, record, 1),
        queues.call("default", "tests.jobs.batches.fail_until", record, str(flag)),
        queues.call("default", ADD, record, 2),
    )
    for _ in range(3):
        run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    dead_id = state.steps[1].job_ids[0]
    assert (state.state, [s.state for s in state.steps]) == ("stopped", ["succeeded", "completed_with_dead", "waiting"])
    assert state.steps[2].waiting_on == [dead_id]  # the remaining step waits on the dead job

    flag.write_text("ok")
    assert retry_dead_letter(DeadLetter.objects.get(job_id=dead_id).pk).outcome == "ok"
    for _ in range(3):
        run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    assert (state.state, [s.state for s in state.steps]) == ("succeeded", ["succeeded"] * 3)
    assert lines(record) == ["add 1 0", "recovered", "add 2 0"]


def test_discarding_a_dead_step_cancels_the_rest_of_the_chain(queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    chain = queues.chain(
        queues.call("default", "tests.jobs.batches.fail_until", record, str(tmp_path / "never")),
        queues.call("default", ADD, record, 2),
    )
    run_burst(queue_redis)
    dead_id = queues.chain_state(chain.id).steps[0].job_ids[0]
    assert discard_dead_letter(DeadLetter.objects.get(job_id=dead_id).pk).outcome == "ok"
    run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    assert (state.state, [s.state for s in state.steps]) == ("canceled", ["completed_with_dead", "canceled"])
    assert lines(record) == []


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: queues.chain(), "at least one step"),
        (lambda: queues.chain("tests.jobs.batches.add"), "step 0 must be queues.call"),
        (lambda: queues.group(), "at least one"),
        (lambda: queues.group(queues.call("default", ADD, "p", 1), print), "argument 1 must be queues.call"),
        (lambda: queues.chain(queues.call("default", ADD, "p", 1), pass_result="yes"), "pass_result"),
    ],
)
def test_bad_chains_are_refused_naming_the_step_and_the_fix(make, message):
    with pytest.raises(queues.InvalidJob, match=message):
        make()


def test_an_unknown_chain_is_none(queue_redis):
    assert queues.chain_state("no-such-chain") is None
