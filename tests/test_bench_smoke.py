"""bench/peers.py and bench/redis_cost.py with tiny counts, for this project's workers and stock rq's SimpleWorker
only (the peers' own virtual environment is not built: too slow for CI), so the side-by-side benchmarks cannot rot
(issues 21 and 36).
Asserts that it completes and prints a row with a rate per system and workload; never a timing.

It starts its own redis-server and SQLite database, so CI's PostgreSQL pass skips it (marker ``harness``, as
the poison harness: the SQLite pass only)."""

import re
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.harness]

SYSTEMS = {"ours-nofork": "ours: rqworker --no-fork", "rq-simple": "rq: SimpleWorker"}


def test_peers_smoke_run_prints_a_row_per_system_and_workload():
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "peers.py"),
            "--systems",
            ",".join(SYSTEMS),
            "--jobs-a",
            "100",
            "--jobs-b",
            "20",
            "--jobs-b-serial",
            "10",
            "--latency-jobs",
            "3",
            "--stall",
            "20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for workload, jobs in (("A", 100), ("B", 10)):
        for label in SYSTEMS.values():
            row = re.compile(
                rf"^\| {workload} \| {re.escape(label)} \| {jobs} \| [\d,]+ \| [\d.]+ ms \| [\d.]+ ms "
                rf"\| [\d.]+ \| \d+ MiB \| [\d.]+ \|$",
                re.M,
            )
            assert len(row.findall(out.stdout)) == 1, f"no row for {workload} {label}:\n{out.stdout}"


def test_redis_cost_smoke_run_prints_a_row_and_the_targets_per_system():
    """bench/redis_cost.py (issue 36) on a few hundred jobs, ours --no-fork and stock rq's SimpleWorker: it
    completes, and prints each system's Redis CPU and commands per job and the target lines."""
    labels = {  # ours-c8 left out: the same code path of the script as ours-nofork, another worker's label
        "ours-nofork": "ours: rqworker --no-fork",
        "rq-simple": "rq: SimpleWorker",
    }
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "redis_cost.py"), "--systems", ",".join(labels), "--jobs", "300"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for label in labels.values():
        row = re.compile(rf"^\| {re.escape(label)} \| \d+ µs \| [\d.]+ \| [\d,]+ \|$", re.M)
        assert len(row.findall(out.stdout)) == 1, f"no row for {label}:\n{out.stdout}"
    verdicts = re.findall(r"^\| rqworker [^|]+ \| [^|]+ \| (PASS|MISS) \|$", out.stdout, re.M)
    assert len(verdicts) == 3, out.stdout  # CPU, commands and the ratio to rq


def test_servers_smoke_run_prints_each_servers_redis_cpu_and_the_ratio():
    """bench/servers.py (issue 36) on 200 jobs: one server, then two; it completes and prints a row per server
    and run, and the ratio of what two servers carry to one's."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "servers.py"), "--jobs", "200"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    rows = re.findall(
        r"^\| (one server|two servers) \| (default|b) \| ([\d,]+) \| [\d.]+ s \| \d+ µs \|", out.stdout, re.M
    )
    assert rows == [("one server", "default", "200"), ("two servers", "default", "100"), ("two servers", "b", "100")]
    assert re.search(r"^two servers carry [\d.]+x one server's jobs", out.stdout, re.M), out.stdout
