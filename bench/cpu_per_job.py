"""CPU seconds per job and jobs/s of one burst worker, for checkouts alternated on the same box
(issue 21's last figures in bench/README.md: what hiredis and the serializer memo save).

    .venv/bin/python bench/cpu_per_job.py . --rounds 3                          # this checkout, A and B
    .venv/bin/python bench/cpu_per_job.py /tmp/old . --rounds 3                 # two checkouts, alternated
    .venv/bin/python bench/cpu_per_job.py . .:no-hiredis --rounds 3             # with and without hiredis

Each round runs, for each checkout in turn, workload A (``--jobs-a`` no-op jobs, ``rqworker --no-fork``)
and workload B (``--jobs-b`` jobs that GET bench/peer_jobs/httpd.py's 100 ms answer, ``rqworker
--concurrency 32``), peers.py's jobs (``bench.peer_jobs.ours``) enqueued beforehand with ``queues.enqueue_many``,
on one private redis-server. Printed per run: the jobs' steady rate (the first 10 % left out, from their
own end times) and the worker process's user + system CPU time over the jobs (its start-up included: the
same for every checkout). ``<checkout>:no-hiredis`` runs that checkout with hiredis hidden from
redis-py (a ``sitecustomize`` that makes ``import hiredis`` fail), as before hiredis was a dependency.
Each checkout runs its own ``manage.py`` with this checkout's ``.venv``.
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

PYTHON = str(ROOT / ".venv" / "bin" / "python")
NO_HIREDIS = "import sys\nsys.modules['hiredis'] = None  # redis-py then packs and parses in Python\n"
ENQUEUE = """
import time, django
django.setup()
import queues
from bench.peer_jobs import ours
func = ours.io if {io} else ours.noop
for start in range(0, {jobs}, 500):
    queues.enqueue_many("default", func, [(time.time(),) for _ in range(min(500, {jobs} - start))])
"""


def one_run(checkout, hide_hiredis, workload, jobs, redis_url, http_url, tmp):
    run_dir = Path(tempfile.mkdtemp(dir=tmp))
    record_dir = run_dir / "records"  # the jobs' record files only (measure.records reads every file there)
    record_dir.mkdir()
    prefix = f"cpu-{uuid.uuid4().hex[:6]}"
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
        BENCH_HTTP_URL=http_url,
    )
    env.pop("CACHE_REDIS_URL", None)
    paths = [str(checkout)]
    if hide_hiredis:
        site = Path(tmp) / "no-hiredis"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(NO_HIREDIS)
        paths.insert(0, str(site))
    env["PYTHONPATH"] = os.pathsep.join(paths)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v", "0"], cwd=checkout, env=env, check=True)
    subprocess.run([PYTHON, "-c", ENQUEUE.format(io=workload == "B", jobs=jobs)], cwd=checkout, env=env, check=True)
    args = ["--concurrency", "32"] if workload == "B" else ["--no-fork"]
    worker = subprocess.Popen(
        [PYTHON, "manage.py", "rqworker", "default", "--burst", "-v", "0", "--without-scheduler", *args],
        cwd=checkout,
        env=env,
    )
    _, status, usage = os.wait4(worker.pid, 0)
    if status != 0:
        raise SystemExit(f"the worker of {checkout} exited with status {status}")
    ends = sorted(record[2] for record in records(record_dir))
    first = len(ends) // 10
    rate = (len(ends) - first - 1) / (ends[-1] - ends[first])
    return rate, (usage.ru_utime + usage.ru_stime) / len(ends) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="+", help="checkout directories; <dir>:no-hiredis hides hiredis")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs-a", type=int, default=5000)
    parser.add_argument("--jobs-b", type=int, default=3000)
    parser.add_argument("--workloads", default="A,B")
    opts = parser.parse_args()
    from devtools.redis_server import RedisServer

    tmp = tempfile.mkdtemp(prefix="optima-cpu-")
    runs = {}
    with RedisServer() as server:
        httpd = subprocess.Popen(
            [PYTHON, str(ROOT / "bench" / "peer_jobs" / "httpd.py")], stdout=subprocess.PIPE, text=True
        )
        try:
            http_url = f"http://127.0.0.1:{int(httpd.stdout.readline().split()[-1])}/wait"
            for number in range(1, opts.rounds + 1):
                for spec in opts.checkouts:
                    path, _, flag = spec.partition(":")
                    for workload in opts.workloads.split(","):
                        jobs = opts.jobs_a if workload == "A" else opts.jobs_b
                        rate, cpu = one_run(
                            Path(path).resolve(), flag == "no-hiredis", workload, jobs, server.url, http_url, tmp
                        )
                        runs.setdefault((spec, workload), []).append((rate, cpu))
                        print(
                            f"round {number}  {spec:<28} {workload}  {rate:7.1f} jobs/s  {cpu:6.3f} ms CPU/job",
                            flush=True,
                        )
        finally:
            httpd.terminate()
            httpd.wait()
    print("\n| checkout | workload | jobs/s (median) | CPU ms / job (median) |\n| --- | --- | ---: | ---: |")
    for (spec, workload), values in runs.items():
        print(
            f"| {spec} | {workload} | {statistics.median(v[0] for v in values):.0f} | "
            f"{statistics.median(v[1] for v in values):.3f} |"
        )


if __name__ == "__main__":
    main()
