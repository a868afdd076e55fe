"""Job functions of the batch tests (tests/queues/workflows/): members and callbacks that leave a line in a file."""

import os

import queues
from tests.jobs import hold_until, work


def note(path, line):
    with open(path, "a") as f:
        f.write(f"{line}\n")


def lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


@queues.job
def member(path, i):
    note(path, f"member {i}")
    return i


@queues.job
def callback(path, kind, batch_id):
    state = queues.batch_state(batch_id)  # None under queues.testing.inline(): nothing in Redis
    note(path, f"{kind} {batch_id}" + ("" if state is None else f" {state.finished} {state.dead}"))


@queues.job
def fail_until(path, flag):
    """Dead at once (PermanentError) until the file ``flag`` exists."""
    if not os.path.exists(flag):
        raise queues.PermanentError("not yet")
    note(path, "recovered")


@queues.job
def fan_out(path, n):
    """A member that adds ``n`` members to its own batch, then works a little after adding them."""
    with queues.current_batch():
        for i in range(n):
            queues.enqueue("default", member, path, f"child-{i}")
    note(path, "parent")


@queues.job
def worked_then_hang(path, seconds):
    """Does its work, then on its first run hangs (to be SIGKILLed before its success is recorded)."""
    first = not any(line == "worked" for line in lines(path))
    note(path, "worked")
    if first:
        work(seconds)


@queues.job
def wait_for_file(flag):
    hold_until(lambda: os.path.exists(flag), 60, "the flag never appeared")


@queues.job
def add(path, x, previous=None):
    """A chain's step: ``x`` plus what the step before returned (a list for a group: its sum)."""
    before = sum(previous) if isinstance(previous, list) else (previous or 0)
    note(path, f"add {x} {before}")
    return before + x
