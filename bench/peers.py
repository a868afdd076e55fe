#!/usr/bin/env python3
"""This project's workers side by side with stock rq, Celery, dramatiq, arq and taskiq, in one run.

    python3 bench/peers.py                      # every system, 20,000 no-op jobs (A), 2,000 I/O jobs (B)
    python3 bench/peers.py --write              # ... and the table into bench/README.md
    python3 bench/peers.py --workloads C,B-async --systems ours-c32,ours-async,celery,dramatiq,arq,taskiq
    python3 bench/peers.py --jobs-a 200 --jobs-b 40 --latency-jobs 5 --systems ours-nofork,rq-simple   # smoke

One command: it sets up the app's ``.venv`` (dev.py) and, when a peer is asked for, the bench's own
``bench/.venv-peers`` from requirements-bench.txt (rebuilt when that file changes), then runs itself
in the app's venv. One private redis-server for everyone (devtools/redis_server.py), flushed before
each run; one HTTP server (bench/peer_jobs/httpd.py) that answers workload B's requests after 100 ms.

Systems (``--systems``, comma-separated keys; bench/peer_jobs/systems.py): ours-fork, ours-nofork, ours-c32
(``rqworker --concurrency 32``), ours-async (``rqworker --async N``, its ``async def`` jobs), ours-pool2, rq,
rq-simple, celery, celery-late (``acks_late=True``: at-least-once, as ours; issue 36's A target), dramatiq,
arq, taskiq; a system whose command lacks the option it needs is "n/a". Those with concurrency run at
``--concurrency`` (32).
Workloads (``--workloads``, comma list, default A,B), each system in turn (``--rounds`` repeats, medians):
- A: ``--jobs-a`` no-op jobs (workers that fork a process per job get ``--jobs-a-forking``, 1/10);
- B: ``--jobs-b`` jobs that each GET the 100 ms server (workers that run one job at a time get
  ``--jobs-b-serial``, 1/10: at 10 jobs/s per process the full count adds minutes and nothing else);
- B-async: ``--jobs-b-async`` jobs that GET it from an ``async def`` (asyncio streams, a keep-alive pool per
  event loop), for the systems whose jobs are coroutines (ours-async, arq, taskiq), ``--async-concurrency``
  (500) at once in one process;
- C: ``--jobs-c`` no-op jobs, the workers' Redis ``--delay-ms`` (2) away each way: their Redis URL is a delay
  proxy's (bench/peer_jobs/delay_proxy.py) in front of the private redis-server; the producers fill the queue
  on the direct URL (the worker's round trips are what C measures, not the fill).
Figures per run (bench/peer_jobs/measure.py): jobs/s draining a full queue, pick-up latency of
``--latency-jobs`` jobs sent one every 20 ms (A, C) or 150 ms (B, B-async), or every 2 / (its jobs/s) when
longer, to the warm, idle worker, CPU seconds of the worker's process tree per 1,000 jobs, its peak RSS.
"""

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer_jobs.readme import write_section  # noqa: E402
from bench.peer_jobs.report import machine, table, targets, versions  # noqa: E402  (machine, versions: redis_cost.py)
from bench.peer_jobs.systems import APP_BIN, BY_KEY, PEERS_BIN, PEERS_VENV, SYSTEMS  # noqa: E402
from bench.peer_jobs.workloads import (  # noqa: E402
    EVERY,
    WORKLOADS,
    concurrency_of,
    counts,
    plan,
    round_trip_ms,
    start_server,
)

REQS = ROOT / "requirements-bench.txt"
README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- peers.py: begin (written by --write) -->", "<!-- peers.py: end -->"


def markers(workloads):
    """bench/README.md's block for these workloads: A and B share the first; any other set has its own (appended
    at the end of the file the first time), so a run of C and B-async leaves the A/B table alone."""
    if set(workloads) <= {"A", "B"}:
        return BEGIN, END
    name = ",".join(w for w in WORKLOADS if w in workloads)  # the same block whatever the order asked
    return (
        f"<!-- peers.py --workloads {name}: begin (written by --write) -->",
        f"<!-- peers.py --workloads {name}: end -->",
    )


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
def run_all(opts, tmp):
    import redis

    from bench.peer_jobs import measure
    from bench.peer_jobs.systems import Env, command_offers
    from devtools.redis_server import RedisServer

    skipped = {}
    for key in opts.systems:
        if BY_KEY[key].needs and not command_offers(BY_KEY[key].needs):
            skipped[key] = f"n/a (no {BY_KEY[key].needs})"
    results, servers, of = [], [], concurrency_of(opts)
    with RedisServer() as server:
        try:
            httpd, port = start_server("httpd.py")
            servers.append(httpd)
            proxy_url = None
            if "C" in opts.workloads:
                proxy, proxy_port = start_server(
                    "delay_proxy.py", "--target", f"127.0.0.1:{server.port}", "--delay", str(opts.delay_ms / 1000)
                )
                servers.append(proxy)
                proxy_url = f"redis://127.0.0.1:{proxy_port}/0"
                opts.round_trips = (round_trip_ms(proxy_url), round_trip_ms(server.url))
                print(f"* C: PING through the proxy {opts.round_trips[0]:.2f} ms, direct {opts.round_trips[1]:.2f} ms")
            env = Env(server.url, f"http://127.0.0.1:{port}/wait", tmp, f"peers-{uuid.uuid4().hex[:6]}")
            if any(BY_KEY[k].family == "ours" for k in opts.systems):
                subprocess.run(
                    [str(APP_BIN / "python"), "manage.py", "migrate", "-v", "0"],
                    cwd=ROOT,
                    check=True,
                    env=env.for_system(BY_KEY["ours-nofork"], tmp, 1),
                )
            client = redis.Redis.from_url(server.url)
            for workload, keys in plan(opts):
                for _ in range(opts.rounds):
                    for key in keys:
                        if key in skipped:
                            continue
                        system = BY_KEY[key]
                        concurrency = of(system, workload)
                        latency = opts.latency_jobs if workload in ("A", "C") else max(3, opts.latency_jobs * 2 // 5)
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
                            worker_redis=proxy_url if workload == "C" else None,
                        )
                        print(
                            f"  {workload:<7} {system.name(concurrency):<50} "
                            + (
                                f"failed: {result.error}"
                                if result.error
                                else f"{result.rate or 0:8.1f} jobs/s, p50 {result.p50_ms or 0:.1f} ms"
                            ),
                            flush=True,
                        )
                        results.append(result)
        finally:
            for process in servers:
                process.terminate()
                process.wait()
    return results, skipped


# -- the report --------------------------------------------------------------------------------
def report(results, skipped, opts, elapsed):
    lines = table(results, skipped, plan(opts), concurrency_of(opts))
    checks = ["| target | this run | result |", "| --- | ---: | --- |"]
    checks += [f"| {name} | {value} | {verdict} |" for name, value, verdict in targets(results, opts)]
    vers = ", ".join(f"{k} {v}" for k, v in versions().items())
    head = (
        f"{time.strftime('%Y-%m-%d')}, {machine()}; {vers}. One run of "
        f"`{' '.join(['python3', 'bench/peers.py'] + sys.argv[1:])}` ({elapsed / 60:.0f} min), "
        f"{opts.rounds} round(s)."
    )
    if getattr(opts, "round_trips", None):
        head += (
            f" Workload C's workers reach Redis through bench/peer_jobs/delay_proxy.py, {opts.delay_ms:g} ms each "
            f"way: PING {opts.round_trips[0]:.2f} ms through it, {opts.round_trips[1]:.2f} ms direct (medians)."
        )
    return head, lines, checks


def write_readme(block, workloads=("A", "B")):
    write_section(README, *markers(workloads), block)


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--systems",
        default=",".join(s.key for s in SYSTEMS),
        help="comma-separated keys: " + ", ".join(s.key for s in SYSTEMS),
    )
    parser.add_argument(
        "--workloads",
        default="A,B",
        help="comma-separated: A (no-op), B (100 ms HTTP), B-async (B's job as a coroutine), C (no-op, Redis "
        "--delay-ms away); default A,B",
    )
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
    parser.add_argument(
        "--jobs-b-async", type=int, default=10000, help="B-async: coroutine I/O jobs per run (default 10,000)"
    )
    parser.add_argument("--jobs-c", type=int, default=5000, help="C: no-op jobs per run (default 5,000)")
    parser.add_argument("--concurrency", type=int, default=32, help="of the concurrent systems (default 32)")
    parser.add_argument(
        "--async-concurrency",
        type=int,
        default=500,
        help="B-async: jobs at once of the asyncio systems (rqworker --async, arq max_jobs, taskiq; default 500)",
    )
    parser.add_argument(
        "--delay-ms", type=float, default=2.0, help="C: ms the proxy holds each chunk, each way (default 2)"
    )
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
    by_upper = {w.upper(): w for w in WORKLOADS}
    asked = [w.strip().upper() for w in opts.workloads.split(",") if w.strip()]
    if not asked or not set(asked) <= set(by_upper):
        parser.error(f"--workloads takes a comma list of {', '.join(WORKLOADS)}, got {opts.workloads!r}")
    opts.workloads = [by_upper[w] for w in asked]
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
        write_readme(head + "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(checks), opts.workloads)
        print(f"\n* written into {README.relative_to(ROOT)}")
    failed = [r for r in results if r.error]
    if failed:
        sys.exit(f"{len(failed)} run(s) failed: {failed[0].system} {failed[0].workload}: {failed[0].error}")


if __name__ == "__main__":
    main()
