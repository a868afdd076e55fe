#!/usr/bin/env python3
"""Two Redis servers carry twice one server's jobs (issue 36): Redis CPU per server, one server against two.

    python3 bench/servers.py                 # 4,000 no-op jobs: all on one server, then half on each of two
    python3 bench/servers.py --write         # ... and the table into bench/README.md
    python3 bench/servers.py --jobs 400      # a quick look

Workers scale out; one Redis does not (its commands run on one core): the Redis CPU a job costs sets the
ceiling. With queues on two servers (``QUEUES_REDIS_SERVERS``, a queue's ``"redis"`` option) each server does
the work of its own queues' jobs only, so the ceiling doubles if each server's CPU per job stays what one
server's was. Two runs, each on fresh private redis-servers (devtools/redis_server.py) and a fresh SQLite
database:

1. one server: ``--jobs`` no-op jobs (bench/peer_jobs/ours.py) enqueued on ``default``, then drained by two
   ``rqworker --no-fork --burst`` processes;
2. two servers: half the jobs on ``default`` (the default server), half on ``bench-b`` (server ``b``), then
   drained by one ``rqworker --no-fork --burst`` per server (``--server b`` for b's).

Measured per server, from before the first enqueue to the last worker's exit: INFO's ``used_cpu_sys +
used_cpu_user`` (the server process, every thread), per job and in all. The projection: jobs/s the servers carry
when their Redis cores are the limit, ``servers / CPU per job``.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer_jobs.readme import write_section  # noqa: E402
from devtools.redis_server import RedisServer  # noqa: E402

README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- servers.py: begin (written by --write) -->", "<!-- servers.py: end -->"
PYTHON = str(ROOT / ".venv" / "bin" / "python")
ENQUEUE = """
import time, queues
from bench.peer_jobs.ours import noop
for name, count in {plan}.items():
    for start in range(0, count, 500):
        queues.enqueue_many(name, noop, [(time.time(),) for _ in range(min(500, count - start))])
"""


def cpu(client):
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def env_for(servers, tmp):
    """The environment of every process of a run: the default server, the others as REDIS_SERVERS."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}"
    first, *others = servers
    return {
        "PATH": "/usr/bin:/bin",
        "REDIS_URL": first.url,
        "REDIS_SERVERS": json.dumps({"b": others[0].url}) if others else "",
        "QUEUE_PREFIX": prefix,
        "RQ_KEY_PREFIX": prefix,
        "OPTIMA_ENV": "test",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "bench.servers_settings",
        "DATABASE_URL": f"sqlite:///{tmp}/db.sqlite3",
        "QUEUE_JOB_MODULES": "bench.peer_jobs.ours",
        "BENCH_RECORD_DIR": str(tmp),
        "PYTHONPATH": str(ROOT),
    }


def manage(env, *args, **kwargs):
    return subprocess.Popen([PYTHON, "manage.py", *args], cwd=ROOT, env=env, **kwargs)


def run(jobs, two):
    """{server: (CPU seconds, jobs)} and the wall time of one run."""
    servers = [RedisServer().start() for _ in range(2 if two else 1)]
    try:
        with tempfile.TemporaryDirectory(prefix="optima-servers-") as tmp:
            env = env_for(servers, tmp)
            subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
            plan = {"default": jobs // 2, "bench-b": jobs - jobs // 2} if two else {"default": jobs}
            clients = {name: redis.Redis(port=s.port) for name, s in zip(("default", "b"), servers)}
            before = {name: cpu(c) for name, c in clients.items()}
            started = time.monotonic()
            subprocess.run(
                [PYTHON, "manage.py", "shell", "-c", ENQUEUE.format(plan=plan)], cwd=ROOT, env=env, check=True
            )
            if two:
                workers = [manage(env, "rqworker", "default", "--no-fork", "--burst", "-v", "0")]
                workers.append(manage(env, "rqworker", "--server", "b", "--no-fork", "--burst", "-v", "0"))
            else:
                workers = [manage(env, "rqworker", "default", "--no-fork", "--burst", "-v", "0") for _ in range(2)]
            codes = [w.wait(600) for w in workers]
            wall = time.monotonic() - started
            if any(codes):
                raise SystemExit(f"a worker exited with {codes}")
            done = sum(p.stat().st_size for p in Path(tmp).glob("*.bin")) // 24
            if done != jobs:
                raise SystemExit(f"{done} of {jobs} jobs ran")
            used = {name: cpu(c) - before[name] for name, c in clients.items()}
            counts = {"default": plan["default"], "b": plan.get("bench-b", 0)}
            return {name: (used[name], counts[name]) for name in clients}, wall
    finally:
        for server in servers:
            server.stop()


def table(one, two, jobs):
    ((cpu_one, _),) = one[0].values()
    per_job_one = cpu_one / jobs
    lines = [
        "| run | server | jobs | Redis CPU | Redis CPU per job | jobs/s the servers' cores carry |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
        f"| one server | default | {jobs:,} | {cpu_one:.2f} s | {per_job_one * 1e6:.0f} µs | {1 / per_job_one:,.0f} |",
    ]
    per_jobs = []
    for name, (used, count) in two[0].items():
        per_jobs.append(used / count)
        lines.append(f"| two servers | {name} | {count:,} | {used:.2f} s | {used / count * 1e6:.0f} µs | |")
    carried = sum(1 / p for p in per_jobs)
    lines[-1] = lines[-1][: -len("| |")] + f"| {carried:,.0f} (both) |"
    ratio = carried / (1 / per_job_one)
    return "\n".join(lines), ratio


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4000)
    parser.add_argument("--write", action="store_true", help="write the table into bench/README.md")
    opts = parser.parse_args()
    began = time.monotonic()
    one = run(opts.jobs, two=False)
    two = run(opts.jobs, two=True)
    text, ratio = table(one, two, opts.jobs)
    print(text)
    print(f"two servers carry {ratio:.2f}x one server's jobs (wall: one {one[1]:.1f} s, two {two[1]:.1f} s)")
    if opts.write:
        block = (
            f"{time.strftime('%Y-%m-%d')}, one run of `python3 bench/servers.py --write` "
            f"({(time.monotonic() - began) / 60:.1f} min), {opts.jobs:,} no-op jobs per run.\n\n{text}\n\n"
            f"Two servers carry **{ratio:.2f}x** one server's jobs: each server's Redis CPU per job stays near one "
            f"server's (table), so their cores' ceilings add up. Wall time, workers included (2 cores for everything): "
            f"one server {one[1]:.1f} s, two {two[1]:.1f} s."
        )
        write_section(README, BEGIN, END, block)


if __name__ == "__main__":
    main()
