"""Plain helpers of the test suite (no fixtures: those live in the conftest.py files).

``ROOT`` is the repository; ``wait_for`` polls a condition until it holds or fails the test; ``closed_port`` is a
loopback port nothing listens on."""

import socket
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def wait_for(predicate, timeout=30.0, interval=0.05, message="condition"):
    """Poll ``predicate`` until truthy; returns its value. Fails the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
