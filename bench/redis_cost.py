#!/usr/bin/env python3
"""Redis work per job: this project's workers side by side with stock rq, Celery and dramatiq, in one run (issue 36).

    python3 bench/redis_cost.py                    # 3,000 no-op jobs per system, every system
    python3 bench/redis_cost.py --write            # ... and the table into bench/README.md
    python3 bench/redis_cost.py --jobs 300 --systems ours-nofork,rq-simple     # the CI smoke run's size
    python3 bench/redis_cost.py --jobs 300 --instructions       # + redis-server's instructions (valgrind)

Workers scale out; the Redis they share does not: the Redis CPU a job costs sets the ceiling of the whole
system. For each system in turn, one private redis-server (devtools/redis_server.py) is flushed, then
``--jobs`` no-op jobs are enqueued by the system's own client (bench/peer_jobs/produce.py) and drained by its
worker (a real process tree, started from its command line: bench/peer_jobs/systems.py). Measured on the
server, from before the first enqueue to the last job done (enqueue, run and success, and whatever the worker
does meanwhile: heartbeats, polls):

- Redis CPU per job: INFO's ``used_cpu_sys + used_cpu_user`` (the server process, every thread) over the jobs;
- commands per job: INFO commandstats (commands that Lua scripts call included) over the jobs; this script's
  own INFO calls left out;
- jobs per second one Redis core carries: 1 / the CPU per job (the projection: nothing else on that core);
- with ``--instructions``: redis-server's user-space instructions per job, counted by valgrind's callgrind
  (``Callgrind``): the same figure for the same work however busy the machine is, where the CPU seconds above
  move by 20 % from one run to the next on a loaded 2-core box. User space only: what a round trip costs the
  server in the kernel (the socket's read and write, the wake-up) is not in it, and that is where stock rq's
  twelve round trips a job cost it most (it runs fewer instructions a job than ours, whose Lua scripts are
  dear in user space: docs/decisions.md). So no target is judged on it; it says which change made the
  server's own work smaller.

Systems (``--systems``): ours-nofork (``rqworker --no-fork``), ours-c8 (``rqworker --concurrency 8``), both as
configured by default, and both also with rq's own execution records (ours-nofork-records, ours-c8-records:
``QUEUE_RQ_EXECUTION_RECORDS=1``, as a deploy from a release up to 6f24d7d runs: docs/settings.md), rq-simple
(stock rq's SimpleWorker), celery (``--pool threads --concurrency 8``, ``acks_late=True``: at-least-once as
ours is), dramatiq (``--processes 1 --threads 8``). The peers run from bench/.venv-peers (requirements-bench.txt,
built on first use as bench/peers.py builds it). Every run's figures are printed; ``--rounds`` repeats each
system and keeps the median. The targets of issue 36 are printed as PASS/MISS lines.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.peer_jobs.readme import write_section  # noqa: E402
from bench.peer_jobs.systems import APP_BIN, BY_KEY  # noqa: E402

README = ROOT / "bench" / "README.md"
BEGIN, END = "<!-- redis_cost.py: begin (written by --write) -->", "<!-- redis_cost.py: end -->"
THREADS = 8

SYSTEMS = {
    "ours-nofork": replace(BY_KEY["ours-nofork"], label="ours: rqworker --no-fork"),
    "ours-c8": replace(
        BY_KEY["ours-c32"], key="ours-c8", label=f"ours: rqworker --concurrency {THREADS}", concurrency=THREADS
    ),
    # issue 36: with rq's own execution records (queues/jobs/execution.py), as a deploy from a release up to 6f24d7d
    # runs until its workers are gone (docs/settings.md, RQ_EXECUTION_RECORDS; off by default)
    "ours-nofork-records": replace(
        BY_KEY["ours-nofork"],
        key="ours-nofork-records",
        label="ours: rqworker --no-fork, RQ_EXECUTION_RECORDS on",
        env=(("QUEUE_RQ_EXECUTION_RECORDS", "1"),),
    ),
    "ours-c8-records": replace(
        BY_KEY["ours-c32"],
        key="ours-c8-records",
        label=f"ours: rqworker --concurrency {THREADS}, RQ_EXECUTION_RECORDS on",
        concurrency=THREADS,
        env=(("QUEUE_RQ_EXECUTION_RECORDS", "1"),),
    ),
    "rq-simple": BY_KEY["rq-simple"],
    "celery": replace(  # acks_late (at least once, as ours): celery-late's environment
        BY_KEY["celery-late"],
        key="celery",
        label=f"Celery: --pool threads --concurrency {THREADS}, acks_late",
        concurrency=THREADS,
    ),
    "dramatiq": replace(BY_KEY["dramatiq"], label=f"dramatiq: --processes 1 --threads {THREADS}", concurrency=THREADS),
}
TARGET_CPU_US = 100
TARGET_COMMANDS = 20
TARGET_RATIO = 0.2  # of stock rq's SimpleWorker's Redis CPU


@dataclass
class Cost:
    system: str
    jobs: int
    cpu_us: float = None  # Redis CPU per job, microseconds
    commands: float = None  # Redis commands per job
    error: str = ""
    detail: list = None  # --detail: lines of where the CPU went
    instructions: float = None  # --instructions: redis-server's user-space instructions per job


class Callgrind:
    """``--instructions``: redis-server runs under valgrind's callgrind, and each system's window is counted in
    instructions (user space): the same count for the same work whatever else the machine does, where CPU
    seconds on a busy 2-core box move by 20 % from run to run. The kernel's part (the socket writes, the
    wake-ups: ~40 % of the server's CPU, docs/decisions.md) is not in it. The server runs 20-50x slower: use a
    few hundred jobs."""

    def __init__(self, tmp):
        for tool in ("valgrind", "callgrind_control"):
            if shutil.which(tool) is None:
                sys.exit(f"--instructions needs {tool} on PATH (Debian: apt-get install valgrind)")
        self.out = tmp / "callgrind"
        self.prefix = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}.%p")

    def zero(self, pid):
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)

    def count(self, pid):
        """The instructions since ``zero``: callgrind dumps them into a file of its own (``<out>.<pid>.<n>``)."""
        subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
        dumps = sorted(self.out.parent.glob(f"{self.out.name}.{pid}.*"), key=lambda f: f.stat().st_mtime)
        for line in dumps[-1].read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
        raise RuntimeError(f"no totals in {dumps[-1]}")


STATS = ("total_connections_received", "total_net_input_bytes", "total_net_output_bytes", "total_commands_processed")


def server_figures(client):
    """(Redis CPU seconds so far, commands so far, the INFO read): INFO cpu and commandstats, in one INFO call."""
    info = client.info("everything")
    cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    calls = sum(v["calls"] for k, v in info.items() if k.startswith("cmdstat_"))
    return cpu, calls, info


def detail(before, after, jobs):
    """--detail: per job, each command's calls and µs inside it (commandstats), the connections opened and the
    bytes in and out, and the server CPU not spent inside a command (client I/O, event loop, cron)."""
    old, new = before[2], after[2]
    rows, inside = [], 0.0
    for key, stat in new.items():
        if not key.startswith("cmdstat_"):
            continue
        was = old.get(key, {"calls": 0, "usec": 0})
        calls, usec = stat["calls"] - was["calls"], stat["usec"] - was["usec"]
        if calls:
            rows.append((usec / jobs, calls / jobs, key.removeprefix("cmdstat_")))
    # EVAL/EVALSHA's usec includes the commands its script calls: count those once, in the script.
    nested = {"evalsha", "eval", "fcall"}
    inside = sum(u for u, _, name in rows if name in nested)
    lines = [f"    {name:<22} {calls:6.2f} calls/job {usec:7.1f} µs/job" for usec, calls, name in sorted(rows)[::-1]]
    total = (after[0] - before[0]) / jobs * 1e6
    lines.append(f"    scripts (whole, with the commands they call): {inside:.1f} µs/job")
    for stat in STATS:
        lines.append(f"    {stat}: {(new[stat] - old[stat]) / jobs:.2f}/job")
    lines.append(f"    server CPU per job: {total:.1f} µs")
    return lines


def phases(before, enqueued, after, jobs):
    """--detail: the window cut where the producer is done (every job enqueued, before the worker starts): what the
    enqueues cost the server and what the worker's run of them did."""
    return [
        f"    {name}: {(end[0] - start[0]) / jobs * 1e6:.1f} µs/job Redis CPU, "
        f"{(end[1] - start[1] - 1) / jobs:.2f} commands/job"
        for name, start, end in (("enqueue phase", before, enqueued), ("run phase", enqueued, after))
    ]


def run_one(system, jobs, env_maker, tmp, client, stall, callgrind=None):
    from bench.peer_jobs import measure

    name = f"{system.key}-{time.monotonic_ns()}"
    record_dir = tmp / name
    record_dir.mkdir()
    env = env_maker.for_system(system, record_dir, system.concurrency)
    cost = Cost(system.key, jobs)
    client.flushall()
    with open(tmp / f"{name}.log", "w") as log:
        producer = measure.Producer(system, "A", env, log)
        pid = client.info("server")["process_id"]
        if callgrind:
            callgrind.zero(pid)
        before = server_figures(client)
        try:
            producer.send(jobs)
        except RuntimeError as exc:
            producer.close()
            cost.error = str(exc)
            return cost
        enqueued = server_figures(client)
        process = subprocess.Popen(
            system.command(system.concurrency, env_maker.redis_url),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            cost.error = measure.wait_done(process, record_dir, jobs, stall, None)
            after = server_figures(client)
            if callgrind and not cost.error:
                cost.instructions = callgrind.count(pid) / jobs
        finally:
            producer.close()
            measure.stop(process)
    if cost.error:
        cost.error += f" (log: {log.name})"
        return cost
    cost.cpu_us = (after[0] - before[0]) / jobs * 1e6
    cost.detail = detail(before, after, jobs) + phases(before, enqueued, after, jobs)
    cost.commands = (after[1] - before[1] - 2) / jobs  # less the INFO calls that read ``enqueued`` and ``after``
    return cost


def run_all(opts, tmp):
    import redis

    from bench.peer_jobs.systems import Env, command_offers
    from devtools.redis_server import RedisServer

    if any(SYSTEMS[k].family == "ours" for k in opts.systems) and {"ours-c8", "ours-c8-records"} & set(opts.systems):
        if not command_offers("--concurrency"):
            sys.exit("rqworker has no --concurrency: drop ours-c8 from --systems")
    results = []
    callgrind = Callgrind(tmp) if opts.instructions else None
    with RedisServer(prefix=callgrind.prefix if callgrind else ()) as server:
        env = Env(server.url, "http://127.0.0.1:9/unused", tmp, f"cost-{uuid.uuid4().hex[:6]}")
        if any(SYSTEMS[k].family == "ours" for k in opts.systems):
            subprocess.run(
                [str(APP_BIN / "python"), "manage.py", "migrate", "-v", "0"],
                cwd=ROOT,
                check=True,
                env=env.for_system(SYSTEMS["ours-nofork"], tmp, 1),
            )
        client = redis.Redis.from_url(server.url)
        for _ in range(opts.rounds):
            for key in opts.systems:
                cost = run_one(SYSTEMS[key], opts.jobs, env, tmp, client, opts.stall, callgrind)
                print(
                    f"  {SYSTEMS[key].label:<55} "
                    + (cost.error or f"{cost.cpu_us:7.1f} µs Redis CPU/job, {cost.commands:5.1f} commands/job")
                    + (f", {cost.instructions:,.0f} instructions/job" if cost.instructions else ""),
                    flush=True,
                )
                if opts.detail and cost.detail:
                    print("\n".join(cost.detail), flush=True)
                results.append(cost)
    return results


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summary(results, opts):
    """{system key: (cpu µs, commands, instructions or None)} medians over the rounds (None when every run
    failed)."""
    out = {}
    for key in opts.systems:
        good = [r for r in results if r.system == key and not r.error]
        out[key] = (
            (
                median([r.cpu_us for r in good]),
                median([r.commands for r in good]),
                median([r.instructions for r in good]),
            )
            if good
            else None
        )
    return out


def table(costs, results, opts):
    counted = opts.instructions
    lines = [
        "| system | Redis CPU per job | Redis commands per job | jobs/s one Redis core carries |"
        + (" redis-server instructions per job (user space) |" if counted else ""),
        "| --- | ---: | ---: | ---: |" + (" ---: |" if counted else ""),
    ]
    for key in opts.systems:
        label = SYSTEMS[key].label
        if costs[key] is None:
            error = next(r.error for r in results if r.system == key)
            lines.append(f"| {label} | failed: {error} | | |" + (" |" if counted else ""))
            continue
        cpu, commands, instructions = costs[key]
        lines.append(
            f"| {label} | {cpu:.0f} µs | {commands:.1f} | {1e6 / cpu:,.0f} |"
            + (f" {instructions:,.0f} |" if counted else "")
        )
    return lines


def targets(costs):
    """Issue 36's targets, from this run: [(what, value, verdict)]."""
    rows = []
    rq = costs.get("rq-simple")
    for key in ("ours-nofork", "ours-c8", "ours-nofork-records", "ours-c8-records"):
        if costs.get(key) is None:
            continue
        cpu, commands, _instructions = costs[key]
        label = SYSTEMS[key].label.removeprefix("ours: ")
        rows.append((f"{label}: Redis CPU per job (<= {TARGET_CPU_US} µs)", f"{cpu:.0f} µs", cpu <= TARGET_CPU_US))
        rows.append(
            (f"{label}: Redis commands per job (<= {TARGET_COMMANDS})", f"{commands:.1f}", commands <= TARGET_COMMANDS)
        )
        if rq is not None:
            ratio = cpu / rq[0]
            rows.append(
                (
                    f"{label}: Redis CPU / stock rq SimpleWorker's (<= {TARGET_RATIO})",
                    f"{ratio:.2f}x",
                    ratio <= TARGET_RATIO,
                )
            )
    return [(what, value, "PASS" if ok else "MISS") for what, value, ok in rows]


def report(results, opts, elapsed):
    from bench.peers import machine, versions

    costs = summary(results, opts)
    lines = table(costs, results, opts)
    checks = ["| target | this run | result |", "| --- | ---: | --- |"]
    checks += [f"| {what} | {value} | {verdict} |" for what, value, verdict in targets(costs)]
    vers = ", ".join(f"{k} {v}" for k, v in versions().items())
    head = (
        f"{time.strftime('%Y-%m-%d')}, {machine()}; {vers}. One run of "
        f"`{' '.join(['python3', 'bench/redis_cost.py'] + sys.argv[1:])}` ({elapsed / 60:.1f} min), "
        f"{opts.jobs:,} no-op jobs per system, {opts.rounds} round(s) (medians)."
    )
    return head, lines, checks


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS))
    parser.add_argument("--jobs", type=int, default=3000, help="no-op jobs per system (default 3,000)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each system, alternating (medians)")
    parser.add_argument("--stall", type=float, default=60.0, help="seconds without a job done: the run failed")
    parser.add_argument("--write", action="store_true", help="write the table into bench/README.md")
    parser.add_argument("--detail", action="store_true", help="print each run's commands, connections and bytes")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="run redis-server under valgrind's callgrind and count its instructions per job (use ~300 jobs)",
    )
    opts = parser.parse_args(argv)
    opts.systems = [k.strip() for k in opts.systems.split(",") if k.strip()]
    unknown = [k for k in opts.systems if k not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s) {', '.join(unknown)}: choose from {', '.join(SYSTEMS)}")
    if opts.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {opts.jobs}")
    return opts


def main():
    from bench.peers import bootstrap

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally blocks stop redis-server and workers
    opts = parse()
    bootstrap(argparse.Namespace(systems=[k for k in opts.systems if k in BY_KEY]), script=__file__)
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="optima-redis-cost-"))
    print(f"* {', '.join(opts.systems)}; {opts.jobs:,} jobs each; logs in {tmp}", flush=True)
    results = run_all(opts, tmp)
    head, lines, checks = report(results, opts, time.monotonic() - started)
    print("\n" + head + "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(checks))
    if opts.write:
        write_section(README, BEGIN, END, head + "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(checks))
        print(f"\n* written into {README.relative_to(ROOT)}")
    failed = [r for r in results if r.error]
    if failed:
        sys.exit(f"{len(failed)} run(s) failed: {failed[0].system}: {failed[0].error}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
