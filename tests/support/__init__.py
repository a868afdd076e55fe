"""Plain helpers of the test suite (no fixtures: those live in the conftest.py files).

``ROOT`` is the repository; ``wait_for`` polls a condition until it holds or fails the test (``poll``: until it holds
or the time is up); ``closed_port`` is a loopback port nothing listens on; ``child_json`` runs Python code in a
fresh interpreter and returns what it printed as JSON, for the test to assert on.

``poll`` holds the one sleep of the suite's condition waits: the job modules' ``tests.jobs.hold_until`` polls
with it in worker processes, which is why this module imports pytest only where a test fails."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def poll(predicate, timeout=30.0, interval=0.05):
    """Call ``predicate`` until it returns something truthy or ``timeout`` seconds have passed; its last value.
    For waits whose timeout is an answer (a redis-server without TLS) or reported by the caller in its own words."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)  # the poll interval of a condition wait


def wait_for(predicate, timeout=30.0, interval=0.05, message="condition"):
    """Poll ``predicate`` until truthy; returns its value. Fails the test on timeout."""
    value = poll(predicate, timeout, interval)
    if not value:
        import pytest  # here, not at the top: worker processes import this module (tests.jobs), never pytest

        pytest.fail(f"timed out after {timeout}s waiting for {message}")
    return value


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_json(code):
    """Run ``code`` in a fresh ``python -c`` in the repository; -> the JSON value of its last line of output.
    The child reports and the test asserts, so a failure shows the values, not an AssertionError in a child."""
    child = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, f"the child failed (rc {child.returncode}):\n{child.stderr}"
    return json.loads(child.stdout.strip().splitlines()[-1])
