#!/usr/bin/env python
"""How long after a SIGKILL of its worker does a job run again?

    .venv/bin/python bench/sigkill_rerun.py [--rounds 5]

Starts a private redis-server, a throwaway SQLite database and two ``manage.py rqworker default``
processes (default options: LIVENESS_TTL_SECONDS 10, ABANDONED_SCAN_SECONDS 5, backoff 1 s,
SCHEDULER_LOCK_SECONDS 10). Each round enqueues a job whose first run sleeps for ever, SIGKILLs the
worker running it (found from the work horse's parent pid), and measures, from the kill:

- detected: the job leaves "started" (the abandoned-job scan scheduled its next attempt);
- rerun:    the next attempt starts on the other worker (the number the issue asks for).

The killed worker is replaced before the next round. Nothing here touches the session's Redis.
"""

import argparse
import json
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

from devtools.redis_server import RedisServer  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="optima-bench-"))
    server = RedisServer().start()
    env = dict(
        os.environ,
        REDIS_URL=server.url,
        QUEUE_PREFIX=f"bench-{uuid.uuid4().hex[:8]}",
        DATABASE_URL=f"sqlite:///{workdir / 'db.sqlite3'}",
        PYTHONUNBUFFERED="1",
        OPTIMA_ENV="test",
        QUEUE_JOB_MODULES="tests.jobs",
    )  # the job is tests.jobs.resilience.logged_sleep, a declared job
    env.pop("CACHE_REDIS_URL", None)
    env.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)  # queues.enqueue signs; unsigned jobs must not run
    os.environ.update(
        {k: env[k] for k in ("REDIS_URL", "QUEUE_PREFIX", "DATABASE_URL", "OPTIMA_ENV", "QUEUE_JOB_MODULES")}
    )
    os.environ.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optima_site.settings")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)

    import django

    django.setup()
    import queues
    from queues.catalog.lookup import OptimaJob
    from queues.connection.clients import get_connection

    connection = get_connection()
    workers = []

    def start_worker():
        log = open(workdir / f"worker-{len(workers)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "rqworker", "default"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        workers.append(proc)
        return proc

    def wait(predicate, timeout=120, step=0.02):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(step)
        raise SystemExit("timed out")

    def records(path):
        try:
            return [json.loads(line) for line in open(path) if line.strip()]
        except FileNotFoundError:
            return []

    def parent_of(pid):
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])

    results = []
    try:
        live = [start_worker(), start_worker()]
        time.sleep(15)  # let both pass their start-up grace (they only judge others after 12 s)
        for round_no in range(1, args.rounds + 1):
            log = workdir / f"round-{round_no}.jsonl"
            job = queues.enqueue("default", "tests.jobs.resilience.logged_sleep", str(log), first_run_seconds=3600)
            first = wait(lambda: [r for r in records(log) if r["event"] == "start"])[0]
            owner_pid = parent_of(first["pid"])
            victim = next(p for p in live if p.pid == owner_pid)
            time.sleep(1)  # mid-job
            killed_at = time.time()
            victim.send_signal(signal.SIGKILL)
            victim.wait()

            def left_started():
                status = OptimaJob.fetch(job.id, connection=connection).get_status()
                return status != "started" and time.time()

            detected_at = wait(left_started)
            second = wait(lambda: [r for r in records(log) if r["event"] == "start"][1:])[0]
            results.append((second["at"] - killed_at, detected_at - killed_at))
            print(
                f"round {round_no}: rerun {second['at'] - killed_at:5.1f} s after SIGKILL "
                f"(detected after {detected_at - killed_at:4.1f} s)",
                flush=True,
            )
            live.remove(victim)
            live.append(start_worker())
            wait(lambda: [r for r in records(log) if r["event"] == "end"])
            time.sleep(13)  # the replacement passes its start-up grace
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        server.stop()

    reruns = [r for r, _ in results]
    detections = [d for _, d in results]
    print(
        f"\nSIGKILL -> job running again, {len(reruns)} rounds: min {min(reruns):.1f} s, "
        f"median {statistics.median(reruns):.1f} s, max {max(reruns):.1f} s"
    )
    print(
        f"SIGKILL -> abandoned job detected: min {min(detections):.1f} s, "
        f"median {statistics.median(detections):.1f} s, max {max(detections):.1f} s"
    )


if __name__ == "__main__":
    main()
