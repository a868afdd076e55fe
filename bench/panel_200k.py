"""Response times of the queue panel and the dead-letter admin with 200,000 failed jobs / rows and 100,000
live jobs.

    .venv/bin/python bench/panel_200k.py                 # 200,000 dead + 100,000 live jobs, 5 timed runs a page
    .venv/bin/python bench/panel_200k.py --size 50000 --live 25000 --repeat 3
    BENCH_POSTGRES=postgres://postgres@127.0.0.1:5432 .venv/bin/python bench/panel_200k.py

Starts a private redis-server and a throwaway SQLite file (or, with BENCH_POSTGRES, a throwaway
database ``bench_panel_<hex>`` on that server, dropped at the end), under a prefix of its own. Fills
queue ``default``'s failed registry with ``--size`` dead jobs (job hashes and registry entries written
in pipelines of 5,000) and the DeadLetter table with as many rows (bulk_create; with fingerprints and
their FailureGroups, 30 groups: 3 exception classes x 10 message shapes, as the mirror would leave
them), and ``--live`` live jobs (half of ``--size`` unless told) in default's queue (40 %), scheduled (20 %),
started (10 %) and finished (30 %) registries, each in the search index as an enqueue writes it; then requests
each page in-process through Django's test client as a superuser — full request:
middleware, access check, Redis, database, template rendering — once to warm up and
``--repeat`` times measured. Prints median and worst wall time per page (milliseconds) and the
number of SQL queries and Redis round trips of one request, and whether the page keeps the panel's budget
(``BUDGET_MS`` of server time, median, and ``BUDGET_TRIPS`` round trips). The time is the server's (the
request runs in this process: no network, no browser). There is no plain-RQ panel to compare with (django-rq's
pages are gone since issue 33): the times are absolute. Cleans up after itself.
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

PIPE = 5000
BUDGET_MS = 100  # the panel's pages: median server time (issue 33)
BUDGET_TRIPS = 5  # and Redis round trips of one request
LIVE_SHARES = (("queued", 0.4), ("scheduled", 0.2), ("started", 0.1), ("finished", 0.3))


HANDSHAKE = {b"HELLO", b"AUTH", b"CLIENT", b"SELECT"}  # what redis-py sends on connecting, once per connection


class RoundTrips:
    """Redis round trips of this process (one per command, one per pipeline: as devtools/roundtrips.py), without
    a new connection's handshake (the panel's bounded client connects once per request, whatever the page:
    counted apart in ``connects``), as tests/queues/board/test_job_page.py counts them."""

    count = connects = 0

    @classmethod
    def install(cls):
        import redis.connection

        original = redis.connection.AbstractConnection.send_packed_command

        def counted(conn, command, check_health=True):
            first = command if isinstance(command, bytes) else b"".join(command[:2])
            name = first.split(b"\r\n")[2].upper() if first.startswith(b"*") else b""
            if name in HANDSHAKE:
                cls.connects += 1
            else:
                cls.count += 1
            return original(conn, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted


def configure(redis_url):
    prefix = f"bench-panel-{uuid.uuid4().hex[:6]}"
    os.environ["QUEUE_PREFIX"] = prefix
    os.environ["RQ_KEY_PREFIX"] = prefix
    os.environ["REDIS_URL"] = redis_url
    os.environ.setdefault("OPTIMA_ENV", "dev")
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ["QUEUE_JOB_MODULES"] = "tests.jobs"  # the dead jobs are tests.jobs.sample.add, a declared job
    db_file = None
    if os.environ.get("BENCH_POSTGRES"):
        os.environ["DATABASE_URL"] = f"{os.environ['BENCH_POSTGRES'].rstrip('/')}/{postgres_db('create')}"
    else:
        db_file = Path(tempfile.mkdtemp()) / "bench.sqlite3"
        os.environ["DATABASE_URL"] = f"sqlite:///{db_file}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "optima_site.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return prefix, db_file


_PG_NAME = f"bench_panel_{uuid.uuid4().hex[:8]}"


def postgres_db(action):
    """CREATE or DROP the throwaway database on the BENCH_POSTGRES server; returns its name."""
    import psycopg

    with psycopg.connect(f"{os.environ['BENCH_POSTGRES'].rstrip('/')}/postgres", autocommit=True) as conn:
        if action == "create":
            conn.execute(f'CREATE DATABASE "{_PG_NAME}"')
        else:
            conn.execute(f'DROP DATABASE IF EXISTS "{_PG_NAME}" WITH (FORCE)')
    return _PG_NAME


def fill_redis(size):
    """``size`` dead jobs in default's failed registry, as a worker leaves them (hash + ZADD), each
    with its own signature (the signed message includes the job id), as queues.enqueue wrote it."""
    from rq.job import JobStatus
    from rq.registry import FailedJobRegistry

    from queues.catalog.lookup import get_queue
    from queues.jobs import signing

    queue = get_queue("default")
    template = queue.create_job(
        "tests.jobs.sample.add",
        args=[1, 2],
        meta={"queue": "default", "attempt": 5, "attempts_allowed": 5, "dead": "exhausted"},
    )
    template.origin = "default"
    template._status = JobStatus.FAILED
    mapping = template.to_dict()
    registry_key = FailedJobRegistry(queue=queue).key
    ids = [uuid.uuid4().hex for _ in range(size)]
    for start in range(0, size, PIPE):
        with queue.connection.pipeline(transaction=False) as pipe:
            chunk = ids[start : start + PIPE]
            for job_id in chunk:
                template.id = job_id
                mapping[template.SIGNATURE_FIELD] = signing.sign(template)
                pipe.hset(f"{template.redis_job_namespace_prefix}{job_id}", mapping=mapping)
            pipe.zadd(registry_key, {job_id: "+inf" for job_id in chunk})
            pipe.execute()
    return ids


def fill_live(size):
    """``size`` live jobs of default, as rq leaves them (hash + the queue's list or a registry's ZADD), by
    ``LIVE_SHARES``, each signed and in the search index (``search.index.add_into``, as an enqueue writes it);
    -> {state: [ids]}."""
    from types import SimpleNamespace

    from rq.registry import FinishedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

    from queues.catalog.lookup import get_queue
    from queues.jobs import signing
    from queues.search import index

    queue = get_queue("default")
    now = time.time()
    where = {
        "queued": None,
        "scheduled": (ScheduledJobRegistry(queue=queue).key, now + 3600),
        "started": (StartedJobRegistry(queue=queue).key, now + 3600),
        "finished": (FinishedJobRegistry(queue=queue).key, now + 86400),
    }
    made = {}
    for state, share in LIVE_SHARES:
        template = queue.create_job("tests.jobs.sample.add", args=[3, 4], meta={"queue": "default"})
        template.origin = "default"
        template._status = state
        mapping = template.to_dict()
        ids = made[state] = [uuid.uuid4().hex for _ in range(int(size * share))]
        for start in range(0, len(ids), PIPE):
            chunk = ids[start : start + PIPE]
            with queue.connection.pipeline(transaction=False) as pipe:
                for job_id in chunk:
                    template.id = job_id
                    mapping[template.SIGNATURE_FIELD] = signing.sign(template)
                    pipe.hset(f"{template.redis_job_namespace_prefix}{job_id}", mapping=mapping)
                if where[state] is None:
                    pipe.rpush(queue.key, *chunk)
                else:
                    key, score = where[state]
                    members = chunk if state != "started" else [f"{j}:{uuid.uuid4().hex[:8]}" for j in chunk]
                    pipe.zadd(key, {member: score for member in members})
                index.add_into(
                    pipe, "default", [SimpleNamespace(id=j, func_name=template.func_name, meta={}) for j in chunk]
                )
                pipe.execute()
    return made


def fill_db(ids, prefix):
    from django.utils import timezone

    from queues.failures.fingerprint import fingerprint, pattern
    from queues.models import DeadLetter, FailureGroup

    now = timezone.now()
    batch = []
    groups = {}
    for i, job_id in enumerate(ids):
        exc_type = ("httpx.ReadTimeout", "ValueError", "KeyError")[i % 3]
        message = f"failure number {i}: upstream said no ({'abcdefghij'[i % 10]})"
        row = DeadLetter(
            prefix=prefix,
            queue="default",
            job_id=job_id,
            func_path="tests.jobs.sample.add",
            args=[i, 2],
            kwargs={"cabinet": f"cab-{i % 500}"},
            exc_type=exc_type,
            exc_message=message,
            traceback="Traceback ...\n" * 20,
            fingerprint=fingerprint("tests.jobs.sample.add", exc_type, message),
            attempts_made=5,
            attempts_allowed=5,
            reason="exhausted",
            dead_at=now - timezone.timedelta(seconds=i),
        )
        batch.append(row)
        group = groups.setdefault(row.fingerprint, {"row": row, "count": 0, "first": row.dead_at})
        group["count"] += 1
        group["first"] = row.dead_at  # rows go back in time: the last one is the first seen
        if len(batch) == PIPE:
            DeadLetter.objects.bulk_create(batch)
            batch = []
    if batch:
        DeadLetter.objects.bulk_create(batch)
    FailureGroup.objects.bulk_create(
        [
            FailureGroup(
                prefix=prefix,
                fingerprint=fp,
                func_path=g["row"].func_path,
                exc_type=g["row"].exc_type,
                pattern=pattern(g["row"].exc_message),
                example_message=g["row"].exc_message,
                example=DeadLetter.objects.get(prefix=prefix, job_id=g["row"].job_id),
                count=g["count"],
                first_seen=g["first"],
                last_seen=g["row"].dead_at,
                queues=["default"],
            )
            for fp, g in groups.items()
        ]
    )
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE queues_deadletter")  # what autovacuum does to a table this size
            cursor.execute("ANALYZE queues_failuregroup")


SHOW_SQL = False


def measure(client, url, repeat):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url)  # warm-up
    assert response.status_code == 200, (url, response.status_code)
    RoundTrips.count = 0
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    trips, sql = RoundTrips.count, len(queries)
    if SHOW_SQL and queries.captured_queries:
        slowest = max(queries.captured_queries, key=lambda q: float(q["time"]))
        print(f"    slowest SQL {float(slowest['time']) * 1000:.0f} ms: {slowest['sql'][:300]}")
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200
    return statistics.median(times), max(times), sql, trips, len(response.content)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--live", type=int, default=None, help="live jobs (default: half of --size)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sql", action="store_true", help="also print each page's slowest SQL query")
    args = parser.parse_args()
    global SHOW_SQL
    SHOW_SQL = args.sql

    server = RedisServer().start()
    db_file = None
    try:
        prefix, db_file = configure(server.url)
        RoundTrips.install()
        from django.contrib.auth import get_user_model
        from django.test import Client

        from queues.models import DeadLetter

        t0 = time.perf_counter()
        ids = fill_redis(args.size)
        t1 = time.perf_counter()
        fill_db(ids, prefix)
        t2 = time.perf_counter()
        live_size = args.size // 2 if args.live is None else args.live
        live = fill_live(live_size)
        t3 = time.perf_counter()
        print(
            f"filled: {args.size} failed jobs in Redis in {t1 - t0:.1f} s, {args.size} DeadLetter rows in "
            f"{t2 - t1:.1f} s ({os.environ['DATABASE_URL'].split(':')[0]}), {live_size} live jobs "
            f"({', '.join(f'{len(v)} {k}' for k, v in live.items())}) in {t3 - t2:.1f} s"
        )

        user = get_user_model().objects.create_superuser("bench", password="bench-pass-1")
        client = Client()
        client.force_login(user)
        middle = ids[len(ids) // 2]
        sqlite = not os.environ.get("BENCH_POSTGRES")
        mid_page = min(1000, (args.size + 99) // 200)
        row = DeadLetter.objects.get(job_id=middle)
        from queues.models import FailureGroup

        group = FailureGroup.objects.order_by("-count").first()  # the biggest: ~6,700 of the rows
        group_page = min(10, max(1, group.count // 100))
        q = "/admin/queues/queues/1/"
        last = "?page=1000000"  # the last page (paging.page_of clamps the number)
        panel = [
            ("panel: home", "/admin/queues/"),
            ("panel: queue page (queued, page 1)", q),
            ("panel: queued, last page", q + last),
            *[
                (f"panel: {tab}, {which}", f"{q}{tab}/{'' if which == 'page 1' else last}")
                for tab in ("started", "scheduled", "finished", "failed", "deferred", "canceled")
                for which in ("page 1", "last page")
            ],
            ("panel: a queued job", f"{q}{live['queued'][len(live['queued']) // 2]}/"),
            ("panel: a failed job", f"{q}{middle}/"),
            ("panel: workers", "/admin/queues/workers/1/"),
            ("panel: search, the form", "/admin/queues/search/"),
            ("panel: search, a queue's jobs", "/admin/queues/search/?queue=default"),
            ("panel: search, a text in no job", "/admin/queues/search/?q=zebra&queue=default"),
            ("panel: batches", "/admin/queues/batches/"),
            ("panel: find a job by id", f"/admin/queues/find/?job_id={middle}"),
        ]
        print(f"\n{'panel page':42} {'median ms':>10} {'worst ms':>9} {'SQL':>4} {'Redis RT':>8} {'KiB':>6}  budget")
        over = []
        for label, url in panel:
            median, worst, sql, trips, size = measure(client, url, args.repeat)
            within = median <= BUDGET_MS and trips <= BUDGET_TRIPS
            if not within:
                over.append(label)
            verdict = "ok" if within else f"OVER ({BUDGET_MS} ms, {BUDGET_TRIPS} RT)"
            print(f"{label:42} {median:10.0f} {worst:9.0f} {sql:4d} {trips:8d} {size / 1024:6.0f}  {verdict}")
        print(f"panel pages over budget: {len(over)}{': ' + ', '.join(over) if over else ''}")
        pages = [
            ("panel: queue list (home)", "/admin/queues/"),
            ("panel: queue detail", "/admin/queues/queues/1/details/"),
            ("panel: failed jobs, page 1", "/admin/queues/queues/1/failed/"),
            (f"panel: failed jobs, page {mid_page}", f"/admin/queues/queues/1/failed/?page={mid_page}"),
            ("panel: failed jobs, last page", f"/admin/queues/queues/1/failed/?page={(args.size + 99) // 100}"),
            ("panel: one failed job", f"/admin/queues/queues/1/{middle}/"),
            ("panel: find a job by id", f"/admin/queues/find/?job_id={middle}"),
            ("admin: dead letters, page 1", "/admin/queues/deadletter/"),
            (f"admin: dead letters, page {mid_page}", f"/admin/queues/deadletter/?p={mid_page}"),
            (
                "admin: filter queue+status+exception",
                "/admin/queues/deadletter/?queue=default&status__exact=open&exc_type=KeyError",
            ),
            ("admin: search exact job id", f"/admin/queues/deadletter/?q={middle}"),
            (
                f"admin: search message text {'(scan)' if sqlite else '(trigram)'}",
                f"/admin/queues/deadletter/?q=number+{args.size - 1}",
            ),
            ("admin: search one word in every row", "/admin/queues/deadletter/?q=upstream"),
            ("admin: search a word in no row", "/admin/queues/deadletter/?q=zebra"),
            ("admin: one dead letter", f"/admin/queues/deadletter/{row.pk}/change/"),
            ("admin: retry confirmation, all rows", None),
            ("admin: failure groups, page 1", "/admin/queues/failuregroup/"),
            ("admin: one failure group", f"/admin/queues/failuregroup/{group.pk}/change/"),
            ("admin: rows of the biggest group", f"/admin/queues/deadletter/?fingerprint={group.fingerprint}"),
            (
                f"admin: rows of the group, open, page {group_page}",
                f"/admin/queues/deadletter/?fingerprint={group.fingerprint}&status__exact=open&p={group_page}",
            ),
            ("admin: group retry confirmation", ("group", group.pk)),
        ]
        print(f"\n{'page':42} {'median ms':>10} {'worst ms':>9} {'SQL':>4} {'Redis RT':>8} {'KiB':>6}")
        for label, url in pages:
            if url is None:
                median, worst, sql, trips, size = measure_confirm(client, args.repeat)
            elif isinstance(url, tuple):
                median, worst, sql, trips, size = measure_group_confirm(client, url[1], args.repeat)
            else:
                median, worst, sql, trips, size = measure(client, url, args.repeat)
            print(f"{label:42} {median:10.0f} {worst:9.0f} {sql:4d} {trips:8d} {size / 1024:6.0f}")
        if not sqlite:  # the same searches without the trigram indexes (as before migration 0003)
            import importlib

            from django.db import connection

            trigram = importlib.import_module("queues.migrations.0003_failure_groups")
            with connection.cursor() as cursor:
                for name in trigram.TRIGRAM_INDEXES:
                    cursor.execute(f'DROP INDEX "{name}"')
            for label, url in [
                ("admin: search message text, no trigram index", f"/admin/queues/deadletter/?q=number+{args.size - 1}"),
                ("admin: search a word in no row, no trigram", "/admin/queues/deadletter/?q=zebra"),
            ]:
                median, worst, sql, trips, size = measure(client, url, args.repeat)
                print(f"{label:42} {median:10.0f} {worst:9.0f} {sql:4d} {trips:8d} {size / 1024:6.0f}")
    finally:
        server.stop()  # a private server: its keys go with it
        if os.environ.get("BENCH_POSTGRES"):
            from django.db import connections

            connections.close_all()
            postgres_db("drop")
        if db_file is not None:
            for suffix in ("", "-journal", "-wal", "-shm"):
                Path(f"{db_file}{suffix}").unlink(missing_ok=True)


def measure_confirm(client, repeat):
    """The bulk-retry confirmation page for "select all" over every row (POST, nothing retried)."""
    from queues.models import DeadLetter

    pks = list(DeadLetter.objects.values_list("pk", flat=True)[:100])
    data = {"action": "retry_selected", "select_across": "1", "_selected_action": pks, "index": "0"}
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        response = client.post("/admin/queues/deadletter/", data)
        if i:
            times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200 and b"confirm-summary" in response.content, response.status_code
    return statistics.median(times), max(times), 0, 0, len(response.content)


def measure_group_confirm(client, group_pk, repeat):
    """The confirmation page of retrying the biggest failure group (POST, nothing retried)."""
    data = {"action": "retry_groups", "_selected_action": [group_pk], "index": "0"}
    times = []
    for i in range(repeat + 1):
        start = time.perf_counter()
        response = client.post("/admin/queues/failuregroup/", data)
        if i:
            times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200 and b"confirm-summary" in response.content, response.status_code
    return statistics.median(times), max(times), 0, 0, len(response.content)


if __name__ == "__main__":
    main()
