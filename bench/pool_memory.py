#!/usr/bin/env python
"""Memory of N pooled workers against N separate worker processes, idle after a few jobs.

    .venv/bin/python bench/pool_memory.py [--num-workers 4] [--jobs 40] [--rounds 3]

Starts a private redis-server and a throwaway SQLite database, then, one setup at a time (never
both at once, so they share no page with each other):

- pool:     ``manage.py rqworker-pool default --num-workers N`` (one master forking N members);
- separate: N ``manage.py rqworker default`` processes.

Each setup runs ``--jobs`` short jobs (every worker must have run at least one), then idles for
``--settle`` seconds; then every process of each tree (master or worker, members, RQ's scheduler
process; no work horse is alive when idle) is read from ``/proc/<pid>/smaps_rollup``:

- PSS: ``Pss`` (a page shared by k processes counts 1/k in each): what the setup costs the machine;
- USS: ``Private_Clean + Private_Dirty`` (pages only that process maps): what stopping it would free.

Printed: per-setup totals in MiB, and the ratios pool / separate. PSS also divides the pages of
shared libraries with any other process mapping them (e.g. other Python processes on the box):
expect a few percent of noise on a shared machine; USS is not affected. Linux only.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.procs import descendants  # noqa: E402
from devtools.redis_server import RedisServer  # noqa: E402

JOB = "tests.jobs.sample.add"


def memory(pid):
    """(PSS, USS) of one process in KiB, from /proc/<pid>/smaps_rollup; (0, 0) if it is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fp:
            for line in fp:
                name, _, rest = line.partition(":")
                if name in ("Pss", "Private_Clean", "Private_Dirty"):
                    fields[name] = int(rest.split()[0])
    except OSError:
        return 0, 0
    return fields.get("Pss", 0), fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0)


def trees_memory(roots):
    """(PSS, USS, number of processes) summed over every process of every tree, KiB."""
    pss = uss = count = 0
    for root in roots:
        for pid in descendants(root):
            p, u = memory(pid)
            pss, uss, count = pss + p, uss + u, count + 1
    return pss, uss, count


def wait(predicate, timeout=120, step=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise SystemExit(f"timed out waiting for {what}")


class Bench:
    def __init__(self, args):
        self.args = args
        self.workdir = Path(tempfile.mkdtemp(prefix="optima-bench-pool-"))
        self.server = RedisServer().start()
        self.env = dict(
            os.environ,
            REDIS_URL=self.server.url,
            QUEUE_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
            DATABASE_URL=f"sqlite:///{self.workdir / 'db.sqlite3'}",
            PYTHONUNBUFFERED="1",
            OPTIMA_ENV="test",
            QUEUE_JOB_MODULES="tests.jobs",
        )  # JOB is a declared job of tests.jobs
        self.env.pop("CACHE_REDIS_URL", None)
        self.env.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)  # queues.enqueue signs; unsigned jobs must not run
        os.environ.update(
            {k: self.env[k] for k in ("REDIS_URL", "QUEUE_PREFIX", "DATABASE_URL", "OPTIMA_ENV", "QUEUE_JOB_MODULES")}
        )
        os.environ.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optima_site.settings")
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=self.env, check=True)

        import django

        django.setup()
        from rq.worker import Worker

        import queues
        from queues.catalog.lookup import OptimaJob
        from queues.connection.clients import get_connection

        self.queues, self.Worker, self.OptimaJob = queues, Worker, OptimaJob
        self.connection = get_connection()

    def start(self, args, log_name):
        log = open(self.workdir / log_name, "wb")
        return subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )

    def measure(self, kind):
        n = self.args.num_workers
        if kind == "pool":
            procs = [self.start(["rqworker-pool", "default", "--num-workers", str(n)], "pool.log")]
        else:
            procs = [self.start(["rqworker", "default"], f"separate-{i}.log") for i in range(n)]
        try:
            wait(lambda: len(self.Worker.all(connection=self.connection)) == n, what=f"{n} {kind} workers")
            jobs = [self.queues.enqueue("default", JOB, i, i) for i in range(self.args.jobs)]

            def done():
                fetched = self.OptimaJob.fetch_many([j.id for j in jobs], connection=self.connection)
                return all(j is not None and j.get_status() == "finished" for j in fetched) and fetched

            fetched = wait(done, what=f"{len(jobs)} jobs on the {kind} workers")
            busy = {j.worker_name for j in fetched}
            if len(busy) < n:
                raise SystemExit(f"only {len(busy)} of {n} {kind} workers ran a job; raise --jobs")
            time.sleep(self.args.settle)
            return trees_memory([p.pid for p in procs])
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            wait(lambda: not self.Worker.all(connection=self.connection), what=f"the {kind} workers to unregister")

    def close(self):
        self.server.stop()


def mib(kib):
    return kib / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-workers", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=40, help="jobs run by each setup before measuring")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds idle before measuring")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each setup (median reported)")
    args = parser.parse_args()

    bench = Bench(args)
    results = {"pool": [], "separate": []}
    try:
        for round_no in range(1, args.rounds + 1):
            for kind in ("pool", "separate"):
                pss, uss, count = bench.measure(kind)
                results[kind].append((pss, uss, count))
                print(
                    f"round {round_no} {kind:8}: {count} processes, PSS {mib(pss):6.1f} MiB, USS {mib(uss):6.1f} MiB",
                    flush=True,
                )
    finally:
        bench.close()

    med = {
        kind: (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows), rows[0][2])
        for kind, rows in results.items()
    }
    n = args.num_workers
    print(f"\nN = {n} workers, idle after {args.jobs} jobs; median of {args.rounds} rounds\n")
    print("| setup | processes | PSS total | USS total |")
    print("| --- | ---: | ---: | ---: |")
    for kind, label in (("pool", f"`rqworker-pool --num-workers {n}`"), ("separate", f"{n} x `rqworker`")):
        pss, uss, count = med[kind]
        print(f"| {label} | {count} | {mib(pss):.1f} MiB | {mib(uss):.1f} MiB |")
    print(
        f"| **pool / separate** | | **{med['pool'][0] / med['separate'][0]:.2f}** | "
        f"**{med['pool'][1] / med['separate'][1]:.2f}** |"
    )


if __name__ == "__main__":
    main()
