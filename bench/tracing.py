"""What OpenTelemetry tracing (queues/tracing/) costs an enqueue and a fork-free job, off and on.

    .venv/bin/python bench/tracing.py                      # ~30 s on the shared 2-core box
    .venv/bin/python bench/tracing.py --rounds 15 --calls 400 --jobs 400
    .venv/bin/python bench/tracing.py --write              # and replace its section of bench/README.md

One private redis-server (devtools/redis_server.py) and one Django process (this file with
``_child``; SQLite in a temp dir), which runs interleaved rounds (order reversed every other round):

  enqueue    ``--calls`` ``queues.enqueue("default", "bench.jobs.noop")`` per way:
             off (as shipped, no ``OTEL_*``: one boolean check) and on (the SDK's TracerProvider,
             a BatchSpanProcessor, an exporter that drops what it gets: the spans' own cost, no network);
  job        ``--jobs`` no-op jobs run by an ``OptimaSimpleWorker`` in the process (``work(burst=True)``),
             per way: baseline (the worker's ``perform_job`` override removed: rq's own is called, no
             tracing code at all), off (as shipped) and on (as above; the jobs enqueued traced).

Printed: medians over rounds of the per-round ratios, and the cost of the check itself. Ratios: the
box is noisy. The enqueue has no baseline way (its check is inline): its off cost is the check and
the extra call frame, timed by ``timeit``, over the median enqueue.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
README = ROOT / "bench" / "README.md"
SECTION = "## `tracing.py` — what OpenTelemetry costs an enqueue and a job, off and on"


def child(rounds, calls, jobs):
    import time
    import timeit

    import django

    django.setup()
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from rq.utils import utcparse

    import queues
    from queues import tracing
    from queues.catalog.lookup import get_queue
    from queues.connection.clients import get_connection
    from queues.tracing import setup
    from queues.worker import adapter

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    client = get_connection()
    override = adapter.WorkerBehaviour.perform_job

    def way(name):
        if name == "on":
            setup.activate(provider)
        else:
            setup.activate(None)
        if name == "baseline":
            if "perform_job" in adapter.WorkerBehaviour.__dict__:
                del adapter.WorkerBehaviour.perform_job
        else:
            adapter.WorkerBehaviour.perform_job = override

    def enqueue_round(n):
        started = time.perf_counter()
        for _ in range(n):
            queues.enqueue("default", "bench.jobs.noop")
        return (time.perf_counter() - started) / n

    def job_round(n):
        ids = [queues.enqueue("default", "bench.jobs.noop").id for _ in range(n)]
        worker = adapter.OptimaSimpleWorker([get_queue("default", connection=client)], connection=client)
        worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
        with client.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hget(f"bench:job:{job_id}", "ended_at")
            ended = sorted(utcparse(value.decode()) for value in pipe.execute())
        skip = n // 10  # the worker's start-up
        return (ended[-1] - ended[skip]).total_seconds() / (n - 1 - skip)  # steady state, from the jobs' ends

    for name in ("on", "off", "baseline"):  # warm up: imports, connections, compiled scripts
        way(name)
        enqueue_round(20)
        job_round(20)
    enqueue = {"off": [], "on": []}
    job = {"baseline": [], "off": [], "on": []}
    for r in range(rounds):
        for name in list(enqueue) if r % 2 == 0 else list(reversed(enqueue)):
            way(name)
            enqueue[name].append(enqueue_round(calls))
        client.flushdb()
        for name in list(job) if r % 2 == 0 else list(reversed(job)):
            way(name)
            job[name].append(job_round(jobs))
        client.flushdb()
    way("off")

    # The off path's own cost at enqueue: the check and the call of ``_place`` (a frame with keywords).
    def place(queue, job, when, *, name, unique, explicit_id, fail_fast, durable):
        return job

    def off_path():
        if tracing.on:
            pass
        return place(None, None, None, name="default", unique=None, explicit_id=False, fail_fast=False, durable=False)

    number = 200_000
    check = min(timeit.repeat(off_path, number=number, repeat=5)) / number

    # The off path's own cost per job: the worker's override (the check, then super()) over rq's call.
    class Rq:
        def perform_job(self, job, queue, execution):
            return True

    class Override(Rq):
        def perform_job(self, job, queue, execution):
            if not tracing.on:
                return super().perform_job(job, queue, execution)

    plain, wrapped = Rq(), Override()
    layer = (
        min(timeit.repeat(lambda: wrapped.perform_job(1, 2, 3), number=number, repeat=5))
        - min(timeit.repeat(lambda: plain.perform_job(1, 2, 3), number=number, repeat=5))
    ) / number
    provider.shutdown()
    print(json.dumps({"enqueue": enqueue, "job": job, "check": check, "layer": layer}))


def report(data, opts):
    def median_ratio(times, a, b):
        return statistics.median(x / y for x, y in zip(times[a], times[b]))

    enqueue, job = data["enqueue"], data["job"]
    per_enqueue = statistics.median(enqueue["off"])
    per_job = statistics.median(job["off"])
    lines = [
        f"`python3 bench/tracing.py --rounds {opts.rounds} --calls {opts.calls} --jobs {opts.jobs}` "
        "(medians of per-round ratios; interleaved rounds in one process, private Redis):",
        "",
        "| | off (as shipped, no `OTEL_*`) | on (SDK, spans dropped by the exporter) |",
        "| --- | ---: | ---: |",
        f"| `queues.enqueue` | +{data['check'] / per_enqueue * 100:.2f} % (the check and its call frame: "
        f"{data['check'] * 1e9:.0f} ns of {per_enqueue * 1e6:.0f} µs) | "
        f"{median_ratio(enqueue, 'on', 'off'):.2f}x off |",
        f"| a fork-free no-op job | +{data['layer'] / per_job * 100:.2f} % (the override's check and frame: "
        f"{data['layer'] * 1e9:.0f} ns of {per_job * 1e6:.0f} µs) | {median_ratio(job, 'on', 'off'):.2f}x off |",
        f"| a fork-free no-op job, measured: off over no tracing code at all | "
        f"{median_ratio(job, 'off', 'baseline'):.3f}x | |",
        "",
        "Off costs an enqueue one attribute check and one call (timed by `timeit`, over the median enqueue) and "
        "a job one check and one frame in the worker's `perform_job` override (over the median job, from "
        "the jobs' own `ended_at`, start-up left out); the measured rounds with and without the override "
        "agree within the noise of a round on this shared box. On, the cost is the SDK's "
        "span (ids, attributes, the processor's queue); the export runs in the BatchSpanProcessor's thread "
        "and is not counted (a forking worker's horse also waits for its export before it exits: "
        "docs/tracing.md).",
    ]
    return "\n".join(lines)


def write_section(text):
    readme = README.read_text()
    block = f"{SECTION}\n\n{text}\n"
    if SECTION in readme:
        readme = re.sub(re.escape(SECTION) + r"\n.*?(?=\n## |\Z)", lambda m: block, readme, flags=re.S)
    else:
        readme = readme.rstrip("\n") + "\n\n" + block
    README.write_text(readme)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=300, help="enqueues per round and way")
    parser.add_argument("--jobs", type=int, default=300, help="jobs per round and way")
    parser.add_argument("--write", action="store_true", help="replace this bench's section of bench/README.md")
    opts = parser.parse_args()

    from devtools.redis_server import RedisServer

    workdir = tempfile.mkdtemp(prefix="optima-bench-tracing-")
    with RedisServer() as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(
            REDIS_URL=server.url,
            DATABASE_URL=f"sqlite:///{workdir}/db.sqlite3",
            OPTIMA_ENV="test",
            QUEUE_PREFIX="bench",
            QUEUE_JOB_MODULES="bench.jobs",
            DJANGO_SETTINGS_MODULE="optima_site.settings",
        )
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], check=True, env=env, cwd=ROOT)
        out = subprocess.run(
            [sys.executable, __file__, "_child", str(opts.rounds), str(opts.calls), str(opts.jobs)],
            check=True,
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
    text = report(json.loads(out.strip().splitlines()[-1]), opts)
    print(text)
    if opts.write:
        write_section(text)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
