"""bench/peers.py's workloads: which systems run each one, how many jobs, how many at once, and the helper servers
a run starts (workload B's 100 ms HTTP server, workload C's delay proxy in front of Redis).

- A and C: no-op jobs (C with the workers' Redis ``--delay-ms`` away through bench/peer_jobs/delay_proxy.py);
- B and B-async: a GET answered after 100 ms (B-async: from an ``async def``, only for the systems whose jobs
  are coroutines, ``--async-concurrency`` at once).
"""

import statistics
import subprocess
import time

from .systems import APP_BIN, BY_KEY, ROOT

WORKLOADS = ("A", "B", "B-async", "C")
# seconds between two paced jobs (B: longer than one job, for serial workers)
EVERY = {"A": 0.02, "B": 0.15, "B-async": 0.15, "C": 0.02}


def counts(system, workload, opts):
    if workload == "A":
        return opts.jobs_a_forking if system.key in ("ours-fork", "ours-pool2", "rq") else opts.jobs_a
    if workload == "C":
        return opts.jobs_c if system.concurrency > 1 else max(opts.jobs_c // 10, min(opts.jobs_c, 100))
    if workload == "B-async":
        return opts.jobs_b_async
    return opts.jobs_b_serial if system.serial else opts.jobs_b


def concurrency_of(opts):
    """-> f(system, workload): jobs at once (B-async: ``--async-concurrency``, else ``--concurrency``; 1 if serial)."""

    def of(system, workload):
        if system.concurrency == 1:
            return 1
        return opts.async_concurrency if workload == "B-async" else opts.concurrency

    return of


def plan(opts):
    """[(workload, [system keys])]: B-async only for the systems whose jobs are coroutines (arq, taskiq, ours-async)."""
    return [(w, [k for k in opts.systems if w != "B-async" or BY_KEY[k].async_jobs]) for w in opts.workloads]


def start_server(script, *args):
    """A helper of ours (httpd.py, delay_proxy.py) in the app's venv; -> (process, the port it listens on)."""
    process = subprocess.Popen(
        [str(APP_BIN / "python"), str(ROOT / "bench" / "peer_jobs" / script), *args], stdout=subprocess.PIPE, text=True
    )
    return process, int(process.stdout.readline().split()[-1])


def round_trip_ms(url, times=50):
    """Median PING round trip to ``url``, in ms."""
    import redis

    client = redis.Redis.from_url(url)
    client.ping()
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        client.ping()
        spent.append((time.perf_counter() - started) * 1000)
    client.close()
    return statistics.median(spent)
