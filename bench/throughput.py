"""Enqueue cost, worker throughput and worker memory: this project against plain RQ, same run.

    .venv/bin/python bench/throughput.py            # 2,000 enqueues, 500 jobs per worker run
    .venv/bin/python bench/throughput.py --jobs 1000 --enqueues 5000

On a private redis-server:
- enqueue: ``queues.enqueue`` (validation, JSON, meta) vs plain ``rq.Queue.enqueue`` (pickle) — one
  job per call, no pipeline, same process;
- throughput: ``manage.py rqworker --burst`` (this project: retries, liveness, pause, metrics
  signals, retention) vs plain ``rq worker --burst`` on the same number of no-op jobs;
- memory: peak RSS of the worker process tree (``ru_maxrss`` of the children).
Prints ratios (ours / plain); absolute times are noisy on a shared machine.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.redis_server import RedisServer  # noqa: E402

PY = sys.executable


def child(code, env):
    out = subprocess.run([PY, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def timed_worker(args, env):
    """Run a worker to completion through a wrapper that reports the peak RSS of its process tree."""
    wrapper = ("import resource, subprocess, sys, time\n"
               "t = time.perf_counter()\n"
               "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
               "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([PY, "-c", wrapper, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    seconds, peak_kib = out.stdout.split()
    return float(seconds), int(peak_kib)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--enqueues", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=500)
    opts = parser.parse_args()

    with RedisServer() as server:
        prefix = f"bench-{uuid.uuid4().hex[:6]}"
        base = {k: v for k, v in os.environ.items() if k not in ("RQ_KEY_PREFIX",)}
        ours_env = dict(base, REDIS_URL=server.url, QUEUE_PREFIX=prefix, LOG_LEVEL="WARNING",
                        DATABASE_URL=f"sqlite:///{tempfile.mkdtemp()}/db.sqlite3",
                        DJANGO_SETTINGS_MODULE="optima_site.settings")
        plain_env = dict(base)
        plain_env.pop("QUEUE_PREFIX", None)
        subprocess.run([PY, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=ours_env, check=True)

        n = opts.enqueues
        ours_enqueue = float(child(
            "import django, time; django.setup(); import queues\n"
            "queues.enqueue('default', 'os.getpid')\n"
            f"t = time.perf_counter()\nfor _ in range({n}): queues.enqueue('default', 'os.getpid')\n"
            "print(time.perf_counter() - t)", ours_env))
        plain_enqueue = float(child(
            f"import time; from redis import Redis; from rq import Queue\n"
            f"q = Queue('default', connection=Redis.from_url({server.url!r}))\nq.enqueue('os.getpid')\n"
            f"t = time.perf_counter()\nfor _ in range({n}): q.enqueue('os.getpid')\n"
            "print(time.perf_counter() - t)", plain_env))
        import redis

        client = redis.Redis.from_url(server.url)
        client.flushall()

        jobs = opts.jobs
        child("import django; django.setup(); import queues\n"
              f"[queues.enqueue('default', 'os.getpid') for _ in range({jobs})]\nprint('ok')", ours_env)
        ours_run, ours_rss = timed_worker([PY, "manage.py", "rqworker", "default", "--burst"], ours_env)
        assert client.llen(f"{prefix}:queue:default") == 0
        child(f"from redis import Redis; from rq import Queue\n"
              f"q = Queue('default', connection=Redis.from_url({server.url!r}))\n"
              f"[q.enqueue('os.getpid') for _ in range({jobs})]\nprint('ok')", plain_env)
        plain_run, plain_rss = timed_worker([str(Path(PY).parent / "rq"), "worker", "default", "--burst",
                                             "--url", server.url, "--with-scheduler"], plain_env)
        assert client.llen("rq:queue:default") == 0

    rows = [
        ("enqueue, per call", ours_enqueue / n * 1e6, plain_enqueue / n * 1e6, "µs"),
        (f"worker, {jobs} no-op jobs", jobs / ours_run, jobs / plain_run, "jobs/s"),
        ("worker peak RSS", ours_rss / 1024, plain_rss / 1024, "MiB"),
    ]
    print(f"{'measure':<24} {'ours':>10} {'plain RQ':>10}  unit    ours/plain")
    for name, ours, plain, unit in rows:
        print(f"{name:<24} {ours:>10.1f} {plain:>10.1f}  {unit:<7} {ours / plain:>6.2f}x")


if __name__ == "__main__":
    main()
