#!/usr/bin/env python3
"""This project's workers side by side with stock rq, Celery, dramatiq and arq, in one run.

    python3 bench/peers.py                      # every system, 20,000 no-op jobs (A), 2,000 I/O jobs (B)
    python3 bench/peers.py --write              # ... and the table into bench/README.md
    python3 bench/peers.py --jobs-a 200 --jobs-b 40 --latency-jobs 5 --systems ours-nofork,rq-simple   # smoke

One command: it sets up the app's ``.venv`` (dev.py) and, when a peer is asked for, the bench's own
``bench/.venv-peers`` from requirements-bench.txt (rebuilt when that file changes), then runs itself
in the app's venv. One private redis-server for everyone (devtools/redis_server.py), flushed before
each run; one HTTP server (bench/peer_jobs/httpd.py) that answers workload B's requests after 100 ms.

Systems (``--systems``, comma-separated keys; bench/peer_jobs/systems.py): ours-fork, ours-nofork,
ours-c32 (``rqworker --concurrency 32``: "n/a" while the command has no such option), ours-pool2,
rq, rq-simple, celery, dramatiq, arq; those with concurrency run at ``--concurrency`` (32).
Workloads, each system in turn (A for all, then B for all; ``--rounds`` repeats, medians):
- A: ``--jobs-a`` no-op jobs (workers that fork a process per job get ``--jobs-a-forking``, 1/10);
- B: ``--jobs-b`` jobs that each GET the 100 ms server (workers that run one job at a time get
  ``--jobs-b-serial``, 1/10: at 10 jobs/s per process the full count adds minutes and nothing else).
Figures per run (bench/peer_jobs/measure.py): jobs/s draining a full queue, pick-up latency of
``--latency-jobs`` jobs sent one every 20 ms (A) or 150 ms (B), or every 2 / (its jobs/s) when longer, to
the warm, idle worker, CPU seconds
of the worker's process tree per 1,000 jobs, its peak RSS.
"""

import argparse
import hashlib
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

from bench.peer_jobs.readme import write_section  # noqa: E402
from bench.peer_jobs.systems import APP_BIN, BY_KEY, PEERS_BIN, PEERS_VENV, SYSTEMS  # noqa: E402

REQS = ROOT / "requirements-bench.txt"
README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- peers.py: begin (written by --write) -->", "<!-- peers.py: end -->"
EVERY = {"A": 0.02, "B": 0.15}  # seconds between two paced jobs (B: longer than one job, for serial workers)


# -- environments ------------------------------------------------------------------------------
def ensure_peers_venv():
    """bench/.venv-peers with requirements-bench.txt, (re)installed when that file changed."""
    import venv

    stamp = PEERS_VENV / ".requirements.sha256"
    digest = hashlib.sha256(REQS.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    if not (PEERS_BIN / "python").exists():
        print(f"* creating {PEERS_VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(PEERS_VENV)
    print("* installing requirements-bench.txt into bench/.venv-peers", flush=True)
    subprocess.run(
        [str(PEERS_BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(REQS)],
        check=True,
        cwd=ROOT,
    )
    stamp.write_text(digest)


def in_app_venv():
    return Path(sys.prefix).resolve() == (ROOT / ".venv").resolve()


def bootstrap(opts, script=__file__):
    """From any python3: the venvs, then ``script`` again (same arguments) in the app's venv."""
    if not in_app_venv():
        import dev

        dev.ensure_venv()
    if any(BY_KEY[k].peers_venv for k in opts.systems):
        ensure_peers_venv()
    if not in_app_venv():
        os.execv(str(APP_BIN / "python"), [str(APP_BIN / "python"), str(script), *sys.argv[1:]])


# -- the run -----------------------------------------------------------------------------------
def counts(system, workload, opts):
    if workload == "A":
        return opts.jobs_a_forking if system.key in ("ours-fork", "ours-pool2", "rq") else opts.jobs_a
    return opts.jobs_b_serial if system.serial else opts.jobs_b


def run_all(opts, tmp):
    import redis

    from bench.peer_jobs import measure
    from bench.peer_jobs.systems import Env, command_offers
    from devtools.redis_server import RedisServer

    skipped = {}
    if "ours-c32" in opts.systems and not command_offers("--concurrency"):
        skipped["ours-c32"] = "n/a (no --concurrency)"
    results = []
    with RedisServer() as server:
        httpd = subprocess.Popen(
            [str(APP_BIN / "python"), str(ROOT / "bench" / "peer_jobs" / "httpd.py")], stdout=subprocess.PIPE, text=True
        )
        try:
            port = int(httpd.stdout.readline().split()[-1])
            env = Env(server.url, f"http://127.0.0.1:{port}/wait", tmp, f"peers-{uuid.uuid4().hex[:6]}")
            if any(BY_KEY[k].family == "ours" for k in opts.systems):
                subprocess.run(
                    [str(APP_BIN / "python"), "manage.py", "migrate", "-v", "0"],
                    cwd=ROOT,
                    check=True,
                    env=env.for_system(BY_KEY["ours-nofork"], tmp, 1),
                )
            client = redis.Redis.from_url(server.url)
            for workload in opts.workloads:
                for _ in range(opts.rounds):
                    for key in opts.systems:
                        if key in skipped:
                            continue
                        system = BY_KEY[key]
                        concurrency = opts.concurrency if system.concurrency > 1 else 1
                        latency = opts.latency_jobs if workload == "A" else max(3, opts.latency_jobs * 2 // 5)
                        result = measure.run(
                            system,
                            workload,
                            counts(system, workload, opts),
                            concurrency=concurrency,
                            env_maker=env,
                            tmp=tmp,
                            redis=client,
                            latency_count=latency,
                            every=EVERY[workload],
                            stall=opts.stall,
                        )
                        print(
                            f"  {workload} {system.name(concurrency):<45} "
                            + (
                                f"failed: {result.error}"
                                if result.error
                                else f"{result.rate or 0:8.1f} jobs/s, p50 {result.p50_ms or 0:.1f} ms"
                            ),
                            flush=True,
                        )
                        results.append(result)
        finally:
            httpd.terminate()
            httpd.wait()
    return results, skipped


# -- the report --------------------------------------------------------------------------------
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def table(results, skipped, opts):
    """Markdown lines, one row per system and workload (medians over the rounds)."""
    lines = [
        "| workload | system | jobs | jobs/s | pick-up p50 | pick-up p95 | CPU s / 1,000 jobs | peak RSS "
        "| Redis cmds/job |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for workload in opts.workloads:
        for key in opts.systems:
            system = BY_KEY[key]
            concurrency = opts.concurrency if system.concurrency > 1 else 1
            name = system.name(concurrency)
            if key in skipped:
                lines.append(f"| {workload} | {name} | | {skipped[key]} | | | | | |")
                continue
            runs = [r for r in results if r.system == key and r.workload == workload]
            good = [r for r in runs if not r.error]
            if not good:
                lines.append(
                    f"| {workload} | {name} | {runs[0].jobs if runs else ''} | failed: "
                    f"{runs[0].error if runs else 'not run'} | | | | | |"
                )
                continue
            lines.append(
                f"| {workload} | {name} | {good[0].jobs:,} | {fmt(median([r.rate for r in good]), ',.0f')} "
                f"| {fmt(median([r.p50_ms for r in good]), '.1f')} ms "
                f"| {fmt(median([r.p95_ms for r in good]), '.1f')} ms "
                f"| {fmt(median([r.cpu_per_1000 for r in good]), '.2f')} "
                f"| {fmt(median([r.peak_rss_mib for r in good]), '.0f')} MiB "
                f"| {fmt(median([r.commands_per_job for r in good]), '.1f')} |"
            )
    return lines


def targets(results, opts):
    """The issue's targets, from this run: [(what, value, verdict)]."""

    def rate(key, workload):
        return median([r.rate for r in results if r.system == key and r.workload == workload and not r.error])

    def ahead(a, b):
        return None if a is None or b is None else a / b

    c = opts.concurrency
    rows = [
        (f"B: ours --concurrency {c}, jobs/s (>= 250)", rate("ours-c32", "B"), lambda v: v >= 250, ".0f"),
        (
            f"B: ours --concurrency {c} / Celery threads {c}",
            ahead(rate("ours-c32", "B"), rate("celery", "B")),
            lambda v: v > 1,
            ".2f",
        ),
        (
            f"B: ours --concurrency {c} / dramatiq {c} threads",
            ahead(rate("ours-c32", "B"), rate("dramatiq", "B")),
            lambda v: v > 1,
            ".2f",
        ),
        (
            f"A: ours --no-fork / Celery threads {c}",
            ahead(rate("ours-nofork", "A"), rate("celery", "A")),
            lambda v: v > 1,
            ".2f",
        ),
    ]
    return [(name, fmt(v, spec), "n/a" if v is None else ("PASS" if ok(v) else "MISS")) for name, v, ok, spec in rows]


def versions():
    code = (
        "import importlib.metadata as m\nfor p in %r:\n    try: print(p, m.version(p))\n"
        "    except m.PackageNotFoundError: pass"
    )
    out = {}
    for python, packages in (
        (APP_BIN / "python", ("rq", "redis", "Django")),
        (PEERS_BIN / "python", ("celery", "kombu", "dramatiq", "arq", "redis")),
    ):
        if python.exists():
            text = subprocess.run([str(python), "-c", code % (packages,)], capture_output=True, text=True).stdout
            venv = "app" if python.parent == APP_BIN else "peers"
            pairs = (line.split() for line in text.splitlines())
            out.update({f"{p} ({venv})" if p == "redis" else p: v for p, v in pairs})
    from devtools.redis_server import redis_server_binary

    server = subprocess.run([redis_server_binary(), "--version"], capture_output=True, text=True).stdout.split()
    out["redis-server"] = next((w[2:] for w in server if w.startswith("v=")), "?")
    return out


def machine():
    model = "?"
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores ({model}), Python {sys.version.split()[0]}"


def report(results, skipped, opts, elapsed):
    lines = table(results, skipped, opts)
    checks = ["| target | this run | result |", "| --- | ---: | --- |"]
    checks += [f"| {name} | {value} | {verdict} |" for name, value, verdict in targets(results, opts)]
    vers = ", ".join(f"{k} {v}" for k, v in versions().items())
    head = (
        f"{time.strftime('%Y-%m-%d')}, {machine()}; {vers}. One run of "
        f"`{' '.join(['python3', 'bench/peers.py'] + sys.argv[1:])}` ({elapsed / 60:.0f} min), "
        f"{opts.rounds} round(s)."
    )
    return head, lines, checks


def write_readme(block):
    write_section(README, BEGIN, END, block)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--systems",
        default=",".join(s.key for s in SYSTEMS),
        help="comma-separated keys: " + ", ".join(s.key for s in SYSTEMS),
    )
    parser.add_argument("--workloads", default="A,B", help="A (no-op), B (100 ms HTTP), or both (default)")
    parser.add_argument("--jobs-a", type=int, default=20000, help="no-op jobs per run (default 20,000)")
    parser.add_argument(
        "--jobs-a-forking",
        type=int,
        default=None,
        help="no-op jobs for the workers that fork per job (default: --jobs-a / 10)",
    )
    parser.add_argument("--jobs-b", type=int, default=2000, help="I/O jobs per run (default 2,000)")
    parser.add_argument(
        "--jobs-b-serial",
        type=int,
        default=None,
        help="I/O jobs for the workers that run one at a time (default: --jobs-b / 10)",
    )
    parser.add_argument(
        "--latency-jobs",
        type=int,
        default=100,
        help="paced jobs for the pick-up latency (A; B gets 2/5 of them); default 100",
    )
    parser.add_argument("--concurrency", type=int, default=32, help="of the concurrent systems (default 32)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each system per workload, alternating")
    parser.add_argument(
        "--stall",
        type=float,
        default=60.0,
        help="seconds without a job done after which a run counts as failed (default 60)",
    )
    parser.add_argument("--write", action="store_true", help="write the table into bench/README.md")
    opts = parser.parse_args(argv)
    opts.systems = [k.strip() for k in opts.systems.split(",") if k.strip()]
    unknown = [k for k in opts.systems if k not in BY_KEY]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}: choose from {', '.join(BY_KEY)}")
    opts.workloads = [w.strip().upper() for w in opts.workloads.split(",") if w.strip()]
    if not set(opts.workloads) <= {"A", "B"} or not opts.workloads:
        parser.error(f"--workloads takes A, B or A,B, got {','.join(opts.workloads)!r}")
    if opts.jobs_a_forking is None:
        opts.jobs_a_forking = max(opts.jobs_a // 10, min(opts.jobs_a, 100))
    if opts.jobs_b_serial is None:
        opts.jobs_b_serial = max(opts.jobs_b // 10, min(opts.jobs_b, 20))
    return opts


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop redis-server and workers
    opts = parse()
    bootstrap(opts)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="optima-peers-"))
    print(f"* {', '.join(opts.systems)}; workloads {','.join(opts.workloads)}; logs in {tmp}", flush=True)
    results, skipped = run_all(opts, tmp)
    head, lines, checks = report(results, skipped, opts, time.monotonic() - started)
    print("\n" + head + "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(checks))
    if opts.write:
        write_readme(head + "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(checks))
        print(f"\n* written into {README.relative_to(ROOT)}")
    failed = [r for r in results if r.error]
    if failed:
        sys.exit(f"{len(failed)} run(s) failed: {failed[0].system} {failed[0].workload}: {failed[0].error}")


if __name__ == "__main__":
    main()
