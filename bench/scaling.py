#!/usr/bin/env python3
"""Scaling and memory of this project's workers: throughput with 1, 2, 4, 8 processes, pick-up latency at
low load, Redis ``used_memory`` over 100,000 completed jobs; a table and bench/img/scaling.png.

    python3 bench/scaling.py                 # ~10 min on the 2-core box
    python3 bench/scaling.py --write         # ... and the table and plot into bench/README.md, bench/img/
    python3 bench/scaling.py --processes 1,2 --jobs 2000 --io-jobs 400 --memory-jobs 5000   # quick look

One command, like bench/peers.py (same venvs, same private redis-server, same jobs and figures:
bench/peer_jobs/). Parts:
- throughput: M (``--processes``) ``manage.py rqworker --no-fork`` processes on ``--jobs`` no-op jobs
  (workload A), and M ``rqworker --concurrency 32`` on ``--io-jobs`` jobs that wait 100 ms on the bench's
  HTTP server (workload B); jobs/s, CPU per 1,000 jobs and peak RSS of all M;
- pick-up latency: one job every 50 ms (``--latency-jobs`` of them) to one idle, warm worker of each
  kind (forking, --no-fork, --concurrency 32): enqueue to start, p50/p95 (the target is <= 5 ms);
- memory: two ``--no-fork`` workers run ``--memory-jobs`` (100,000) no-op jobs, fed in batches of
  1,000 while they run (at most two waiting); Redis ``used_memory`` is sampled every second against the jobs completed.
  Retention (queues/jobs/retention.py: a queue keeps its last 1,000 completed jobs) should hold it flat.
The plot (matplotlib, in the bench's venv: requirements-bench.txt) is drawn by this script run there
(``_plot FILE``).
"""

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer_jobs.readme import write_section  # noqa: E402
from bench.peer_jobs.systems import OURS, PEERS_BIN, System  # noqa: E402

IMG = ROOT / "bench" / "img" / "scaling.png"
README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- scaling.py: begin (written by --write) -->", "<!-- scaling.py: end -->"
LATENCY = [
    System("ours-fork", "rqworker", "ours", OURS),
    System("ours-nofork", "rqworker --no-fork", "ours", OURS + ("--no-fork",)),
    System("ours-c32", "rqworker --concurrency 32", "ours", OURS + ("--concurrency", "32"), concurrency=32),
]


def fanout(count, argv):
    """``_fanout M CMD...``: M copies of CMD, SIGTERM passed on; exits when all have."""
    children = [subprocess.Popen(argv, cwd=ROOT) for _ in range(count)]

    def forward(signum, frame):
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for child in children:
        child.wait()


def processes_system(count, io):
    extra = ("--concurrency", "32") if io else ("--no-fork",)
    return System(
        f"ours-x{count}{'-io' if io else ''}",
        f"{count} x rqworker {' '.join(extra)}",
        "ours",
        ("{python}", __file__, "_fanout", str(count)) + OURS + extra,
        concurrency=32 if io else 1,
        processes=count,
    )


def memory_run(env_maker, tmp, client, total, batch=1000):
    """-> [(seconds, jobs completed, used_memory bytes)] sampled every second while ``total`` jobs run."""
    from bench.peer_jobs import measure

    system = processes_system(2, io=False)
    record_dir = tmp / "memory"
    record_dir.mkdir()
    env = env_maker.for_system(system, record_dir, 1)
    client.flushall()
    samples, stop = [], threading.Event()
    start = time.monotonic()

    def sample():
        while not stop.is_set():
            samples.append(
                (time.monotonic() - start, measure.done_count(record_dir), client.info("memory")["used_memory"])
            )
            stop.wait(1.0)

    with open(tmp / "memory.log", "w") as log:
        producer = measure.Producer(system, "A", env, log)
        worker = subprocess.Popen(
            system.command(1, env_maker.redis_url),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            for sent in range(0, total, batch):
                producer.send(min(batch, total - sent))
                while measure.done_count(record_dir) < sent - batch:  # keep at most two batches waiting
                    time.sleep(0.2)
            error = measure.wait_done(worker, record_dir, total, 60, None)
            time.sleep(3)  # the workers trim when they go idle
        finally:
            stop.set()
            sampler.join()
            producer.close()
            measure.stop(worker)
    if error:
        raise RuntimeError(f"memory run: {error}; see {tmp / 'memory.log'}")
    return samples


def run_all(opts, tmp):
    import redis

    from bench.peer_jobs import measure
    from bench.peer_jobs.systems import APP_BIN, Env
    from devtools.redis_server import RedisServer

    out = {"throughput": [], "latency": [], "memory": []}
    with RedisServer() as server:
        httpd = subprocess.Popen(
            [str(APP_BIN / "python"), str(ROOT / "bench" / "peer_jobs" / "httpd.py")], stdout=subprocess.PIPE, text=True
        )
        try:
            port = int(httpd.stdout.readline().split()[-1])
            env = Env(server.url, f"http://127.0.0.1:{port}/wait", tmp, f"scaling-{uuid.uuid4().hex[:6]}")
            subprocess.run(
                [str(APP_BIN / "python"), "manage.py", "migrate", "-v", "0"],
                cwd=ROOT,
                check=True,
                env=env.for_system(LATENCY[0], tmp, 1),
            )
            client = redis.Redis.from_url(server.url)
            common = dict(env_maker=env, tmp=tmp, redis=client, stall=60.0)
            for io in (False, True):
                for count in opts.processes:
                    system = processes_system(count, io)
                    r = measure.run(
                        system,
                        "B" if io else "A",
                        opts.io_jobs if io else opts.jobs,
                        concurrency=system.concurrency,
                        latency_count=0,
                        every=0,
                        **common,
                    )
                    print(
                        f"  {system.label:<40} {'failed: ' + r.error if r.error else f'{r.rate:8.1f} jobs/s'}",
                        flush=True,
                    )
                    out["throughput"].append(dict(vars(r), processes=count, io=io))
            for system in LATENCY:
                r = measure.run(
                    system,
                    "A",
                    20,
                    concurrency=system.concurrency,
                    latency_count=opts.latency_jobs,
                    every=0.05,
                    **common,
                )
                print(
                    f"  latency {system.label:<32} "
                    + (f"failed: {r.error}" if r.error else f"p50 {r.p50_ms:.1f} ms, p95 {r.p95_ms:.1f} ms"),
                    flush=True,
                )
                out["latency"].append(dict(vars(r), label=system.label, jobs=opts.latency_jobs))
            out["memory"] = memory_run(env, tmp, client, opts.memory_jobs)
            print(
                f"  memory: {len(out['memory'])} samples, used_memory "
                f"{min(s[2] for s in out['memory']) / 2**20:.1f}-{max(s[2] for s in out['memory']) / 2**20:.1f} MiB",
                flush=True,
            )
        finally:
            httpd.terminate()
            httpd.wait()
    return out


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def tables(data):
    lines = [
        "| workload | processes | jobs | jobs/s | per process | CPU s / 1,000 jobs | peak RSS (all) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in data["throughput"]:
        what = "B: I/O, rqworker --concurrency 32" if r["io"] else "A: no-op, rqworker --no-fork"
        if r["error"]:
            lines.append(f"| {what} | {r['processes']} | {r['jobs']:,} | failed: {r['error']} | | | |")
            continue
        lines.append(
            f"| {what} | {r['processes']} | {r['jobs']:,} | {fmt(r['rate'], ',.0f')} "
            f"| {fmt(r['rate'] and r['rate'] / r['processes'], ',.0f')} | {fmt(r['cpu_per_1000'], '.2f')} "
            f"| {fmt(r['peak_rss_mib'], '.0f')} MiB |"
        )
    lines += [
        "",
        "| one job every 50 ms to | jobs | pick-up p50 | pick-up p95 | target p95 |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in data["latency"]:
        if r["error"]:
            lines.append(f"| {r['label']} | | failed: {r['error']} | | |")
            continue
        verdict = "n/a" if r["p95_ms"] is None else ("PASS" if r["p95_ms"] <= 5 else "MISS")
        lines.append(
            f"| {r['label']} | {r['jobs']} | {fmt(r['p50_ms'], '.1f')} ms | {fmt(r['p95_ms'], '.1f')} ms "
            f"| <= 5 ms: {verdict} |"
        )
    mem = data["memory"]
    if mem:
        marks = [m for m in (1000, 10000, 25000, 50000, 75000, 100000) if m <= mem[-1][1]]
        lines += [
            "",
            "| jobs completed | " + " | ".join(f"{m:,}" for m in marks) + " | end |",
            "| --- |" + " ---: |" * (len(marks) + 1),
        ]
        at = [next(s for s in mem if s[1] >= m) for m in marks] + [mem[-1]]
        lines.append("| Redis used_memory | " + " | ".join(f"{s[2] / 2**20:.2f} MiB" for s in at) + " |")
    return lines


def plot(path):
    """``_plot FILE``: bench/img/scaling.png from the JSON ``run`` wrote (matplotlib: the bench's venv)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = json.loads(Path(path).read_text())
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for io, label in ((False, "A: no-op, --no-fork"), (True, "B: 100 ms I/O, --concurrency 32")):
        rows = [r for r in data["throughput"] if r["io"] == io and not r["error"]]
        left.plot([r["processes"] for r in rows], [r["rate"] for r in rows], marker="o", label=label)
    left.set(xlabel="worker processes", ylabel="jobs/s", title="Throughput (2-core box)")
    left.set_xscale("log", base=2)
    counts = sorted({r["processes"] for r in data["throughput"]})
    left.set_xticks(counts, [str(c) for c in counts])
    left.set_ylim(bottom=0)
    left.legend()
    mem = data["memory"]
    right.plot([s[1] for s in mem], [s[2] / 2**20 for s in mem], marker=".")
    right.set(xlabel="jobs completed", ylabel="Redis used_memory (MiB)", title="Redis memory (retention: 1,000)")
    right.set_ylim(bottom=0)
    fig.tight_layout()
    IMG.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG, dpi=100)


def write_readme(block):
    write_section(README, BEGIN, END, block)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "_fanout":
        return fanout(int(sys.argv[2]), sys.argv[3:])
    if len(sys.argv) > 2 and sys.argv[1] == "_plot":
        return plot(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop redis-server and workers
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="1,2,4,8", help="worker process counts (default 1,2,4,8)")
    parser.add_argument("--jobs", type=int, default=10000, help="no-op jobs per throughput run (default 10,000)")
    parser.add_argument("--io-jobs", type=int, default=2000, help="I/O jobs per throughput run (default 2,000)")
    parser.add_argument("--latency-jobs", type=int, default=200, help="jobs sent one every 50 ms (default 200)")
    parser.add_argument("--memory-jobs", type=int, default=100000, help="jobs of the memory run (default 100,000)")
    parser.add_argument("--write", action="store_true", help="write the tables into bench/README.md")
    opts = parser.parse_args()
    opts.processes = [int(p) for p in opts.processes.split(",")]
    import peers

    # --write draws the plot in the bench's venv: build it then
    peers.bootstrap(argparse.Namespace(systems=["celery"] if opts.write else []), __file__)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="optima-scaling-"))
    print(f"* logs in {tmp}", flush=True)
    data = run_all(opts, tmp)
    data_file = tmp / "scaling.json"
    data_file.write_text(json.dumps(data))
    minutes = (time.monotonic() - started) / 60
    head = (
        f"{time.strftime('%Y-%m-%d')}, {peers.machine()}. One run of "
        f"`{' '.join(['python3', 'bench/scaling.py'] + sys.argv[1:])}` ({minutes:.0f} min)."
    )
    lines = tables(data)
    print("\n" + head + "\n\n" + "\n".join(lines))
    if opts.write:
        subprocess.run([str(PEERS_BIN / "python"), __file__, "_plot", str(data_file)], cwd=ROOT, check=True)
        write_readme(head + "\n\n" + "\n".join(lines) + "\n\n![scaling](img/scaling.png)")
        print(f"\n* written into {README.relative_to(ROOT)} and {IMG.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
