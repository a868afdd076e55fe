"""bench/peers.py's report: the table (medians over the rounds), the issue's targets as PASS/MISS lines, the
versions and the machine (bench/redis_cost.py prints the same header).

The target lines of a workload appear only when that workload ran.
"""

import os
import statistics
import subprocess
import sys

from .systems import APP_BIN, BY_KEY, PEERS_BIN


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def table(results, skipped, plan, concurrency_of):
    """Markdown lines, one row per system and workload of ``plan`` ([(workload, [keys])]); medians over the rounds."""
    lines = [
        "| workload | system | jobs | jobs/s | pick-up p50 | pick-up p95 | CPU s / 1,000 jobs | peak RSS "
        "| Redis cmds/job |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for workload, keys in plan:
        for key in keys:
            system = BY_KEY[key]
            name = system.name(concurrency_of(system, workload))
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
    """The issue's targets for the workloads that ran: [(what, value, verdict)]."""

    def rate(key, workload):
        return median([r.rate for r in results if r.system == key and r.workload == workload and not r.error])

    def ahead(a, b):
        return None if a is None or b is None else a / b

    def more(v):
        return v > 1

    c, a = opts.concurrency, opts.async_concurrency
    rows = [
        ("B", f"B: ours --concurrency {c}, jobs/s (>= 250)", rate("ours-c32", "B"), lambda v: v >= 250, ".0f"),
        (
            "B",
            f"B: ours --concurrency {c} / Celery threads {c}",
            ahead(rate("ours-c32", "B"), rate("celery", "B")),
            more,
            ".2f",
        ),
        (
            "B",
            f"B: ours --concurrency {c} / dramatiq {c} threads",
            ahead(rate("ours-c32", "B"), rate("dramatiq", "B")),
            more,
            ".2f",
        ),
        (
            "A",
            f"A: ours --no-fork / Celery threads {c}",
            ahead(rate("ours-nofork", "A"), rate("celery", "A")),
            more,
            ".2f",
        ),
        (
            "A",
            f"A: ours --no-fork / Celery threads {c}, acks_late (>= 1)",
            ahead(rate("ours-nofork", "A"), rate("celery-late", "A")),
            lambda v: v >= 1,
            ".2f",
        ),
        (
            "A",
            f"A: ours --concurrency {c} / ours --no-fork (>= 1)",
            ahead(rate("ours-c32", "A"), rate("ours-nofork", "A")),
            lambda v: v >= 1,
            ".2f",
        ),
        (
            "B-async",
            f"B-async: ours --async {a}, jobs/s (>= 1,500)",
            rate("ours-async", "B-async"),
            lambda v: v >= 1500,
            ",.0f",
        ),
        (
            "B-async",
            f"B-async: ours --async {a} / arq max_jobs={a} (ahead of arq)",
            ahead(rate("ours-async", "B-async"), rate("arq", "B-async")),
            more,
            ".2f",
        ),
        (
            "B-async",
            f"B-async: ours --async {a} / taskiq --max-async-tasks {a} (ahead of taskiq)",
            ahead(rate("ours-async", "B-async"), rate("taskiq", "B-async")),
            more,
            ".2f",
        ),
        (
            "C",
            f"C: ours --concurrency {c} / Celery threads {c} (>= 1)",
            ahead(rate("ours-c32", "C"), rate("celery", "C")),
            lambda v: v >= 1,
            ".2f",
        ),
        (
            "C",
            f"C: ours --concurrency {c} / Celery threads {c}, acks_late (>= 1)",
            ahead(rate("ours-c32", "C"), rate("celery-late", "C")),
            lambda v: v >= 1,
            ".2f",
        ),
    ]
    return [
        (name, fmt(v, spec), "n/a" if v is None else ("PASS" if ok(v) else "MISS"))
        for workload, name, v, ok, spec in rows
        if workload in opts.workloads
    ]


def versions():
    code = (
        "import importlib.metadata as m\nfor p in %r:\n    try: print(p, m.version(p))\n"
        "    except m.PackageNotFoundError: pass"
    )
    out = {}
    for python, packages in (
        (APP_BIN / "python", ("rq", "redis", "Django")),
        (PEERS_BIN / "python", ("celery", "kombu", "dramatiq", "arq", "taskiq", "taskiq-redis", "redis")),
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
