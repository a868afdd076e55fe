"""Redis cost of one /metrics scrape for 1, 10 and 100 queues: this project's collector vs django-rq's.

    .venv/bin/python bench/metrics_scrape.py [--queues 1,10,100] [--repeat 5]

Starts a private redis-server (nothing else talks to it, so INFO commandstats deltas are the
scrape's alone) and an in-memory SQLite database. For each size it declares that many queues,
each holding 2 waiting, 1 completed, 1 failed and 1 delayed job, 50 recorded durations, and
2 live workers listening on every queue. Then, for each collector:

- ``optima``: queues.metrics (cache off, so every scrape reads Redis) rendered by prometheus_client;
- ``django-rq``: django_rq.contrib.prometheus.RQCollector, django-rq's own (what its
  ``/admin/queues/metrics/`` serves), over the same queues;

it counts per scrape the Redis commands (server side, INFO commandstats), the round trips (client
side: every send of a command or a pipeline), the commands Redis flags as writes, and the fastest
scrape's wall time relative to ours (a ratio, not an absolute time: the machine is shared, and on
loopback a round trip costs tens of microseconds; over a network each one adds the RTT). The cached
case shows what a second scrape within METRICS_CACHE_SECONDS costs.
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.redis_server import RedisServer  # noqa: E402
from devtools.roundtrips import RoundTrips  # noqa: E402


def is_write(conn, command):
    """Whether Redis flags the command as one that writes (COMMAND INFO), e.g. ZREMRANGEBYSCORE."""
    name = command.split("|")[0]
    entry = conn.execute_command("COMMAND", "INFO", name).get(name, {})
    return "write" in entry.get("flags", [])


def commandstats(conn):
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in conn.info("commandstats").items()}


def setup(url):
    os.environ.update(
        REDIS_URL=url,
        QUEUE_PREFIX="bench",
        RQ_KEY_PREFIX="bench",
        OPTIMA_ENV="test",
        DATABASE_URL="sqlite://:memory:",
        DJANGO_SETTINGS_MODULE="optima_site.settings",
        LOG_LEVEL="ERROR",
        QUEUE_JOB_MODULES="tests.jobs",
    )  # tests.jobs.sample: declared jobs
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def populate(conn, names):
    import logging

    logging.getLogger("rq").setLevel(logging.CRITICAL)  # the failing jobs' tracebacks are expected
    from rq import SimpleWorker, Worker
    from rq.serializers import JSONSerializer

    from queues.catalog.lookup import OptimaJob, OptimaQueue
    from queues.worker import signals as events

    qs = [OptimaQueue(n, connection=conn) for n in names]
    for q in qs:
        q.enqueue("tests.jobs.sample.add", 1, 2)
        q.enqueue("tests.jobs.sample.fail")
    SimpleWorker(qs, connection=conn, serializer=JSONSerializer, job_class=OptimaJob).work(
        burst=True, logging_level="CRITICAL"
    )
    for q in qs:  # 1 completed and 1 failed each: a job that is not declared would fail too (NotAJob)
        done, failed = q.finished_job_registry.count, q.failed_job_registry.count
        if (done, failed) != (1, 1):
            raise SystemExit(f"queue {q.name}: {done} completed and {failed} failed jobs, expected 1 and 1")
    from datetime import timedelta

    for q in qs:
        q.enqueue("tests.jobs.sample.add", 1, 2)
        q.enqueue("tests.jobs.sample.add", 3, 4)
        q.enqueue_in(timedelta(hours=1), "tests.jobs.sample.add", 5, 6)
        for ms in range(50):
            events.send(events.job_succeeded, queue=q.name, job=None, duration=ms / 1000)
    workers = [Worker(qs, connection=conn, name=f"bench-{i}", serializer=JSONSerializer) for i in range(2)]
    for w in workers:
        w.register_birth()
    return workers


def measure(conn, scrape, repeat):
    scrape()  # warm-up: opens connections (HELLO/CLIENT SETINFO are not part of a scrape)
    before = commandstats(conn)
    RoundTrips.count = 0
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        scrape()
        times.append(time.perf_counter() - started)
    trips = RoundTrips.count
    after = commandstats(conn)
    delta = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    delta["info"] = delta.get("info", 0) - 1  # the `before` INFO itself
    commands = sum(delta.values()) / repeat
    writes = sum(v for k, v in delta.items() if is_write(conn, k)) / repeat
    return {
        "commands": commands,
        "round_trips": trips / repeat,
        "writes": writes,
        "seconds": min(times),
        "by_command": {k: v / repeat for k, v in sorted(delta.items()) if v},
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", default="1,10,100")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(n) for n in args.queues.split(",")]

    with RedisServer() as server:
        setup(server.url)
        import prometheus_client
        import redis
        from django.conf import settings
        from django.test.utils import override_settings
        from django_rq.contrib.prometheus import RQCollector

        from queues.catalog import lookup as registry
        from queues.metrics import collector

        RoundTrips.install()
        conn = redis.Redis.from_url(server.url)
        rows = []
        for n in sizes:
            conn.flushall()
            names = [f"q{i:03d}" for i in range(n)]
            with override_settings(
                OPTIMA_QUEUES={name: {} for name in names}, OPTIMA_QUEUES_OPTIONS={"METRICS_CACHE_SECONDS": 0}
            ):
                settings.RQ_QUEUES = {k: v for k, v in settings.RQ_QUEUES.items() if k in names}
                # django-rq's collector lists workers with the worker class; rq's own reads the same keys.
                settings.RQ = dict(settings.RQ, WORKER_CLASS="rq.worker.Worker")
                workers = populate(conn, names)

                ours = prometheus_client.CollectorRegistry()
                ours.register(collector.QueueCollector())
                theirs = prometheus_client.CollectorRegistry()
                theirs.register(RQCollector())
                # Only the n benchmark queues (the feature apps declare 3 more of their own).
                declared = registry.declared
                registry.declared = lambda: {k: v for k, v in declared().items() if k in names}
                try:
                    optima = measure(conn, lambda: prometheus_client.generate_latest(ours), args.repeat)
                    django_rq = measure(conn, lambda: prometheus_client.generate_latest(theirs), args.repeat)
                finally:
                    registry.declared = declared
                with override_settings(
                    OPTIMA_QUEUES={name: {} for name in names}, OPTIMA_QUEUES_OPTIONS={"METRICS_CACHE_SECONDS": 60}
                ):
                    collector.cache.clear()
                    registry.declared = lambda: {k: v for k, v in declared().items() if k in names}
                    try:
                        cached = measure(conn, lambda: prometheus_client.generate_latest(ours), args.repeat)
                    finally:
                        registry.declared = declared
                for w in workers:
                    w.register_death()
            rows.append((n, optima, django_rq, cached))

    print(f"Redis cost per scrape (mean of {args.repeat} scrapes after one warm-up; private redis-server):\n")
    print("| queues | collector | commands | round trips | writes | time vs optima |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n, optima, django_rq, cached in rows:
        for label, r in (
            ("optima (cache off)", optima),
            ("optima (cached, 2nd scrape)", cached),
            ("django-rq RQCollector", django_rq),
        ):
            ratio = r["seconds"] / optima["seconds"]
            print(
                f"| {n} | {label} | {r['commands']:.0f} | {r['round_trips']:.0f} | {r['writes']:.0f} | {ratio:.2f}x |"
            )
    print("\nCommands per scrape, by command:")
    for n, optima, django_rq, _ in rows:
        print(f"  {n:>3} queues  optima:    {optima['by_command']}")
        print(f"  {n:>3} queues  django-rq: {django_rq['by_command']}")


if __name__ == "__main__":
    main()
