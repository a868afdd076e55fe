"""queues/worker/kernel.py: a forked child (a work horse, RQ's scheduler) never inherits a stream's lock held.

Issue 32, finding 10: a child forked while another thread of its parent is inside a write to stderr
inherits that buffered stream's lock held by a thread it does not have, and hangs on a futex at its first
line. Each case runs in a fresh interpreter with buffered stdio (no PYTHONUNBUFFERED: production's
default), with a thread kept blocked inside a write to stderr (a pipe nobody reads) while the main thread
forks; the child logs a line and exits, or is found still alive after 5 s."""

import os
import subprocess
import sys
import textwrap

import pytest

from tests.support import ROOT

CHILD = textwrap.dedent("""
    import logging, os, sys, threading, time
    FRESH = {fresh}
    if FRESH:
        from queues.worker import kernel
        kernel.fresh_std_streams_after_fork()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")
    read, write = os.pipe()
    os.dup2(write, 2)  # stderr: a pipe nobody reads, so the writer below blocks inside its write
    started = threading.Event()

    def writer():
        started.set()
        while True:
            logging.info("x" * 65536)

    threading.Thread(target=writer, daemon=True).start()
    started.wait()
    time.sleep(0.5)  # the writer fills the pipe, then blocks in write() holding stderr's buffer lock
    pid = os.fork()
    if pid == 0:
        logging.warning("the child's line")
        sys.stderr.flush()
        os._exit(0)
    os.set_blocking(read, False)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.read(read, 1 << 20)  # drain: the child's line (and the writer's) can go through
        except BlockingIOError:
            pass
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            print("exited", os.waitstatus_to_exitcode(status), flush=True)
            break
        time.sleep(0.05)
    else:
        print("hung", flush=True)
        os.kill(pid, 9)
    os._exit(0)
""")


def run(fresh):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered stdio, as in production
    child = subprocess.run(
        [sys.executable, "-c", CHILD.format(fresh=fresh)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    return child.stdout.strip()


def test_a_child_forked_while_another_thread_writes_to_stderr_can_still_log():
    assert run(fresh=True) == "exited 0"


@pytest.mark.slow  # 5 s: the wait that finds it hung
def test_without_fresh_streams_such_a_child_hangs_which_is_what_the_fix_is_for():
    """The hazard itself, shown (CPython does not reset a buffered stream's lock at fork)."""
    assert run(fresh=False) == "hung"
