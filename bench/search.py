"""Job search with 100,000 jobs in one queue: ``queues.search_jobs``, the panel's Search page, ``GET /jobs/``,
and what the search index costs an enqueue.

    .venv/bin/python bench/search.py                 # 100,000 jobs, 5 timed runs per search
    .venv/bin/python bench/search.py --size 20000 --repeat 3

Starts a private redis-server and a throwaway SQLite file under a prefix of its own. Seeds ``--size``
jobs of ``tests.jobs.sample.fail("cabinet-<i>")`` in queue ``default`` with ``queues.enqueue_many``
(batches of 10,000: the real write, index included), then times each search (median and worst of
``--repeat``, after one warm-up) in-process: the function itself, and the page and the API through
Django's test client as a superuser (middleware, access, Redis, rendering). Last, the index's cost on
an enqueue: single ``queues.enqueue`` calls with the index written and with ``add_into`` replaced by a
no-op, interleaved rounds (median of per-round ratios). Prints a table; the figures go in bench/README.md.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.redis_server import RedisServer  # noqa: E402
from devtools.roundtrips import RoundTrips  # noqa: E402

BATCH = 10_000


def configure(redis_url):
    prefix = f"bench-search-{uuid.uuid4().hex[:6]}"
    os.environ["QUEUE_PREFIX"] = prefix
    os.environ["RQ_KEY_PREFIX"] = prefix
    os.environ["REDIS_URL"] = redis_url
    os.environ["OPTIMA_ENV"] = "dev"
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["QUEUE_JOB_MODULES"] = "tests.jobs"
    os.environ.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)
    db_file = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{db_file}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optima_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return db_file


def seed(size):
    import queues
    from tests.jobs import sample

    for start in range(0, size, BATCH):
        queues.enqueue_many("default", sample.fail, [(f"cabinet-{i}",) for i in range(start, min(size, start + BATCH))])


def timed(call, repeat):
    call()  # warm-up
    RoundTrips.count = 0
    result = call()
    trips = RoundTrips.count
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times), trips, result


def enqueue_cost(rounds=9, calls=400):
    """Single enqueues with the index and with ``add_into`` a no-op, in interleaved rounds (which goes
    first alternates): (median ratio of wall time, of this process's CPU time; median us per call with,
    without)."""
    import queues
    from queues.search import index
    from tests.jobs import sample

    real = index.add_into

    def run(indexed):
        index.add_into = real if indexed else (lambda *a, **k: None)
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                queues.enqueue("default", sample.add, i, i)
            return (time.perf_counter() - wall) / calls, (time.process_time() - cpu) / calls
        finally:
            index.add_into = real

    run(True), run(False)
    walls, cpus, per_call = [], [], []
    for round_ in range(rounds):
        first = round_ % 2 == 0
        a, b = run(first), run(not first)
        (w_with, c_with), (w_without, c_without) = (a, b) if first else (b, a)
        walls.append(w_with / w_without)
        cpus.append(c_with / c_without)
        per_call.append((w_with, w_without))
    return (
        statistics.median(walls),
        statistics.median(cpus),
        statistics.median(w for w, _ in per_call),
        statistics.median(n for _, n in per_call),
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    server = RedisServer().start()
    try:
        configure(server.url)
        RoundTrips.install()
        from django.contrib.auth import get_user_model
        from django.test import Client
        from rest_framework.test import APIClient

        import queues

        t0 = time.perf_counter()
        seed(args.size)
        print(f"seeded {args.size:,} jobs in queue default with enqueue_many in {time.perf_counter() - t0:.1f} s")
        user = get_user_model().objects.create_superuser("bench", password="bench-pass-1")
        client, api = Client(), APIClient()
        client.force_login(user)
        api.force_authenticate(user)
        rare = f"cabinet-{args.size - 77}"  # among the newest: found on the first page of the scan
        old = "cabinet-12"  # among the oldest: beyond one scan
        cases = [
            ("search_jobs(queue=default), page 1", lambda: queues.search_jobs(queue="default")),
            ("search_jobs(queue=default), page 2000", lambda: queues.search_jobs(queue="default", start=49_975)),
            ("search_jobs(queue=default, state=queued)", lambda: queues.search_jobs(queue="default", state="queued")),
            ("search_jobs(function=sample.fail)", lambda: queues.search_jobs(function="tests.jobs.sample.fail")),
            (f"search_jobs(text={rare!r})", lambda: queues.search_jobs(text=rare)),
            (f"search_jobs(text={old!r}): a full scan of 5,000, no match", lambda: queues.search_jobs(text=old)),
            (
                f"search_jobs(function=sample.fail, text={old!r}): a scan of 5,000, no match",
                lambda: queues.search_jobs(function="tests.jobs.sample.fail", text=old),
            ),
            (
                "search_jobs(queue=default, state=failed): 0 of them",
                lambda: queues.search_jobs(queue="default", state="failed"),
            ),
            (f"panel /admin/queues/search/?q={rare}", lambda: client.get(f"/admin/queues/search/?q={rare}")),
            (
                f"panel /admin/queues/search/?q={old}: a scan of 2,000, no match",
                lambda: client.get(f"/admin/queues/search/?q={old}"),
            ),
            ("panel /admin/queues/search/?queue=default", lambda: client.get("/admin/queues/search/?queue=default")),
            (f"API GET /jobs/?q={old} (staff)", lambda: api.get(f"/jobs/?q={old}")),
        ]
        print(f"| search ({args.size:,} jobs in one queue) | median ms | worst ms | round trips | found |")
        print("| --- | ---: | ---: | ---: | --- |")
        for label, call in cases:
            median, worst, trips, result = timed(call, args.repeat)
            if hasattr(result, "status_code"):
                assert result.status_code == 200, (label, result.status_code)
                found = "200"
            else:
                found = f"{len(result.hits)} hits, scanned {result.scanned:,} of {result.total:,}"
            print(f"| {label} | {median:.0f} | {worst:.0f} | {trips} | {found} |")
        wall, cpu, with_index, without = enqueue_cost()
        print(
            f"\nqueues.enqueue with the index: {with_index * 1e6:.0f} us, without: {without * 1e6:.0f} us; "
            f"median ratio {wall:.3f} wall ({(wall - 1) * 100:+.1f} %), {cpu:.3f} CPU of this process "
            f"({(cpu - 1) * 100:+.1f} %)"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
