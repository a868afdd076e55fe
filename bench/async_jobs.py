"""``rqworker --async N`` on coroutine jobs that each wait 100 ms: jobs/s and CPU per job of one burst worker
(issue 36, part 2: 500 at a time in one process, the target >= 1,500 jobs/s).

    .venv/bin/python bench/async_jobs.py                                   # --async 500, 10,000 jobs
    .venv/bin/python bench/async_jobs.py --jobs 5000 --slots 500 --rounds 3 --variants async,concurrency

The jobs (``bench.peer_jobs.ours.nap_async``: ``await asyncio.sleep(0.1)``, then the record of
bench/peer_jobs/record.py) are enqueued beforehand with ``queues.enqueue_many`` on a private redis-server;
then ``manage.py rqworker default --burst --without-scheduler`` drains them with ``--async <slots>``
(variant ``async``) or, for comparison, ``--concurrency <slots>`` (variant ``concurrency``: a thread per
job, each coroutine run by rq's ``asyncio.run``). Printed per run: the steady rate from the jobs' own end
times (the first 10 % left out) and the worker's user + system CPU time per job (its start-up included).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer_jobs.measure import records  # noqa: E402
from devtools.redis_server import RedisServer  # noqa: E402

PYTHON = str(ROOT / ".venv" / "bin" / "python")
ENQUEUE = """
import time, django
django.setup()
import queues
from bench.peer_jobs import ours
for start in range(0, {jobs}, 1000):
    queues.enqueue_many("default", ours.nap_async, [(time.time(), {seconds}) for _ in range(min(1000, {jobs} - start))])
"""
OPTION = {"async": "--async", "concurrency": "--concurrency"}


def one_run(variant, slots, jobs, seconds, redis_url, tmp):
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    record_dir = run_dir / "records"
    record_dir.mkdir()
    prefix = f"async-{uuid.uuid4().hex[:6]}"
    env = dict(
        os.environ,
        REDIS_URL=redis_url,
        QUEUE_PREFIX=prefix,
        RQ_KEY_PREFIX=prefix,
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="optima_site.settings",
        OPTIMA_ENV="test",
        DATABASE_URL=f"sqlite:///{run_dir}/db.sqlite3",
        QUEUE_JOB_MODULES="bench.peer_jobs.ours",
        BENCH_RECORD_DIR=str(record_dir),
        PYTHONPATH=str(ROOT),
    )
    env.pop("CACHE_REDIS_URL", None)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    enqueue = ENQUEUE.format(jobs=jobs, seconds=seconds)
    subprocess.run([PYTHON, "-c", enqueue], cwd=ROOT, env=env, check=True)
    worker = subprocess.Popen(
        [PYTHON, "manage.py", "rqworker", "default", "--burst", "-v", "0", "--without-scheduler"]
        + [OPTION[variant], str(slots)],
        cwd=ROOT,
        env=env,
    )
    _, status, usage = os.wait4(worker.pid, 0)
    if status != 0:
        raise SystemExit(f"the worker exited with status {status}")
    ends = sorted(record[2] for record in records(record_dir))
    if len(ends) != jobs:
        raise SystemExit(f"{len(ends)} of {jobs} jobs recorded")
    first = len(ends) // 10
    rate = (len(ends) - first - 1) / (ends[-1] - ends[first])
    return rate, (usage.ru_utime + usage.ru_stime) / len(ends) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--slots", type=int, default=500, help="--async N (or --concurrency N)")
    parser.add_argument("--seconds", type=float, default=0.1, help="each job's wait (asyncio.sleep)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--variants", default="async", help="comma-separated: async, concurrency")
    opts = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="optima-async-")
    runs = {}
    with RedisServer() as server:
        for number in range(1, opts.rounds + 1):
            for variant in opts.variants.split(","):
                rate, cpu = one_run(variant, opts.slots, opts.jobs, opts.seconds, server.url, tmp)
                runs.setdefault(variant, []).append((rate, cpu))
                print(
                    f"round {number}  {OPTION[variant]} {opts.slots:<5} {rate:7.1f} jobs/s  {cpu:6.3f} ms CPU/job",
                    flush=True,
                )
    print("\n| worker | jobs/s (median) | CPU ms / job (median) |\n| --- | ---: | ---: |")
    for variant, values in runs.items():
        print(
            f"| `rqworker {OPTION[variant]} {opts.slots}` | {statistics.median(v[0] for v in values):.0f} | "
            f"{statistics.median(v[1] for v in values):.3f} |"
        )


if __name__ == "__main__":
    main()
