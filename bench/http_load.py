"""HTTP load on the documented production server: many clients enqueueing at once, on SQLite and PostgreSQL.

    python3 bench/http_load.py                        # SQLite, then PostgreSQL if 127.0.0.1:5432 answers
    python3 bench/http_load.py --database sqlite --clients 50 --requests 600
    python3 bench/http_load.py --database postgres://postgres@127.0.0.1:5432/bench_http

Per database, on one private redis-server (devtools/redis_server.py) and the fake marketplace:
``gunicorn optima_site.wsgi`` as docs/operations.md runs it (``--workers 4``, prod settings, token
auth), then ``--clients`` concurrent httpx clients send ``--requests`` requests in all, a mix of

  POST /features/content/      an enqueue inside a transaction (a row + the outbox), 40 %
  POST /features/repricer/     an enqueue with a unique key per request, 25 %
  POST /features/orders/sync/  a unique enqueue of one of 20 cabinets (Redis only), 15 %
  GET  /jobs/<id>/             the status of a job accepted earlier, 10 %
  GET  /admin/queues/          the panel home (basic auth), 5 %
  GET  /metrics                the scrape, 5 %

and the table gives requests/s, p50/p95/p99 per endpoint and every status code seen. Then a burst
worker drains the queues and the run checks that every accepted content and price job ran exactly
once (finished at its first attempt; the orders syncs may retry on the marketplace's rate limit).
Absolute figures depend on the machine: compare the rows of one run.
"""

import argparse
import asyncio
import base64
import collections
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MIX = (("content", 40), ("repricer", 25), ("orders", 15), ("status", 10), ("panel", 5), ("metrics", 5))
CABINETS, PRODUCTS = 20, 200
BOARD_USER, BOARD_PASSWORD = "bench", "bench-password-long-enough"

SETUP = """
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from features.sellers.models import Cabinet, Product
user = get_user_model().objects.create_user("bench-seller", password=None)
Cabinet.objects.bulk_create([Cabinet(cabinet_id=i, owner=user) for i in range(1, {cabinets} + 1)])
Product.objects.bulk_create([Product(product_id=i, owner=user) for i in range(1, {products} + 1)])
print("TOKEN " + Token.objects.create(user=user).key)
"""

CHECK = """
import json, os
from rq.job import Job
from rq.serializers import JSONSerializer
from queues.connection.clients import get_connection
accepted = json.loads(open(os.environ["BENCH_ACCEPTED"]).read())
redis = get_connection()
states = {}
for kind, ids in accepted.items():
    for job_id in ids:
        job = Job.fetch(job_id, connection=redis, serializer=JSONSerializer)
        states.setdefault(kind, []).append([job.get_status(refresh=False).value, (job.meta or {}).get("attempt")])
print("STATES " + json.dumps(states))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing answered on 127.0.0.1:{port} within {timeout} s")


def answers(host, port):
    try:
        socket.create_connection((host, port), 1).close()
        return True
    except OSError:
        return False


async def load(base, token, clients, total, seed_ids):
    import httpx

    plan = [kind for kind, weight in MIX for _ in range(weight)]
    results = []
    accepted = collections.defaultdict(list)
    counter = iter(range(total))
    auth = {"Authorization": f"Token {token}"}

    async def one(client, i):
        kind = plan[i % len(plan)]
        if kind == "content":
            req = client.build_request(
                "POST",
                "/features/content/",
                headers=auth,
                json={"product_id": 1 + i % PRODUCTS, "prompt": f"bench {i}"},
            )
        elif kind == "repricer":
            req = client.build_request(
                "POST",
                "/features/repricer/",
                headers=auth,
                json={
                    "product_id": 1 + i % PRODUCTS,
                    "price": "19.90",
                    "idempotency_key": f"bench-{i}-{uuid.uuid4().hex[:8]}",
                },
            )
        elif kind == "orders":
            req = client.build_request(
                "POST", "/features/orders/sync/", headers=auth, json={"cabinet_id": 1 + i % CABINETS}
            )
        elif kind == "status":
            known = accepted["content"] or seed_ids
            req = client.build_request("GET", f"/jobs/{known[i % len(known)]}/", headers=auth)
        elif kind == "panel":
            basic = base64.b64encode(f"{BOARD_USER}:{BOARD_PASSWORD}".encode()).decode()
            req = client.build_request("GET", "/admin/queues/", headers={"Authorization": f"Basic {basic}"})
        else:
            req = client.build_request("GET", "/metrics")
        started = time.perf_counter()
        try:
            response = await client.send(req)
            code = response.status_code
        except httpx.HTTPError as exc:
            code, response = type(exc).__name__, None
        results.append((kind, code, time.perf_counter() - started))
        if response is not None and code == 202:
            accepted[kind].append(response.json()["job_id"])

    async def client_loop():
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            for i in counter:
                await one(client, i)

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    return results, dict(accepted), time.perf_counter() - started


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] * 1000


def run_one(database_url, opts, redis_url):
    label = "PostgreSQL" if database_url.startswith("postgres") else "SQLite"
    prefix = f"bench-http-{uuid.uuid4().hex[:8]}"
    market_port, web_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("QUEUE_ACCEPT_UNSIGNED_UNTIL", "DJANGO_SETTINGS_MODULE")}
    env.update(
        OPTIMA_ENV="prod",
        SECRET_KEY=secrets.token_urlsafe(40),
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="0",
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        QUEUE_PREFIX=prefix,
        QUEUE_BOARD_USER=BOARD_USER,
        QUEUE_BOARD_PASSWORD=BOARD_PASSWORD,
        MARKETPLACE_URL=f"http://127.0.0.1:{market_port}",
        CONTENT_GENERATION_SECONDS="0.01",
        MARKETPLACE_RATE_LIMIT="1000/second",
        LOG_LEVEL="WARNING",
    )
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], check=True, env=env, cwd=ROOT)
    out = subprocess.run(
        [*manage, "shell", "-v", "0", "-c", SETUP.format(cabinets=CABINETS, products=PRODUCTS)],
        check=True,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout
    token = next(line.split()[1] for line in out.splitlines() if line.startswith("TOKEN "))
    logs = Path(tempfile.mkdtemp(prefix="optima-bench-http-"))
    market = subprocess.Popen(
        [sys.executable, "-m", "features.marketplace.fake", "--port", str(market_port), "--quiet"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    web_log = open(logs / "gunicorn.log", "wb")
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "optima_site.wsgi",
            "--bind",
            f"127.0.0.1:{web_port}",
            "--workers",
            str(opts.workers),
            "--timeout",
            "30",
            "--graceful-timeout",
            "30",
        ],
        env=env,
        cwd=ROOT,
        stdout=web_log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for_port(web_port)
        wait_for_port(market_port)
        results, accepted, elapsed = asyncio.run(
            load(f"http://127.0.0.1:{web_port}", token, opts.clients, opts.requests, ["none"])
        )
    finally:
        web.terminate()
        web.wait(60)
        web_log.close()
    try:
        drain = subprocess.run(
            [*manage, "rqworker", "--burst", "--no-fork"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
        )
        accepted_file = logs / "accepted.json"
        accepted_file.write_text(json.dumps(accepted))
        out = subprocess.run(
            [*manage, "shell", "-v", "0", "-c", CHECK],
            env=dict(env, BENCH_ACCEPTED=str(accepted_file)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        market.terminate()
        market.wait(10)
    states = json.loads(next(line for line in out.splitlines() if line.startswith("STATES "))[7:])
    report(label, opts, results, accepted, elapsed, states, drain.returncode, logs)
    return results


def report(label, opts, results, accepted, elapsed, states, drain_rc, logs):
    codes = collections.Counter(str(code) for _, code, _ in results)
    print(f"\n### {label}: {opts.clients} clients, {len(results)} requests, gunicorn --workers {opts.workers}\n")
    print(
        f"{len(results) / elapsed:.0f} requests/s overall; status codes: "
        + ", ".join(f"{code} x{n}" for code, n in sorted(codes.items()))
    )
    print("\n| endpoint | requests | req/s | p50 ms | p95 ms | p99 ms | codes |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for kind, _ in MIX:
        rows = [r for r in results if r[0] == kind]
        if not rows:
            continue
        times = [t for _, _, t in rows]
        kinds = collections.Counter(str(c) for _, c, _ in rows)
        print(
            f"| {kind} | {len(rows)} | {len(rows) / elapsed:.0f} | {percentile(times, 0.5):.0f} | "
            f"{percentile(times, 0.95):.0f} | {percentile(times, 0.99):.0f} | "
            + " ".join(f"{c}:{n}" for c, n in sorted(kinds.items()))
            + " |"
        )
    problems = []
    for kind in ("content", "repricer"):
        ids = accepted.get(kind, [])
        if len(set(ids)) != len(ids):
            problems.append(f"{kind}: {len(ids) - len(set(ids))} job ids answered twice")
        for status, attempt in states.get(kind, []):
            if status != "finished" or attempt != 1:
                problems.append(f"{kind}: a job ended {status} at attempt {attempt}")
    unfinished = [s for s, _ in states.get("orders", []) if s != "finished"]
    five_xx = sum(n for code, n in codes.items() if code.startswith("5") or not code.isdigit())
    print(
        f"\ndrain (rqworker --burst --no-fork) exit {drain_rc}; accepted: "
        + ", ".join(f"{k} {len(v)} ({len(set(v))} distinct)" for k, v in sorted(accepted.items()))
        + f"; orders syncs not finished: {len(unfinished)}"
    )
    print(
        "every accepted content and price job ran exactly once"
        if not problems
        else "NOT exactly once: " + "; ".join(problems[:10])
    )
    print(f"5xx or transport errors: {five_xx} (gunicorn's log: {logs / 'gunicorn.log'})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database", default="both", help="sqlite, postgres, both (default) or a DATABASE_URL")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--workers", type=int, default=4, help="gunicorn workers")
    opts = parser.parse_args()

    from devtools.redis_server import RedisServer

    urls = []
    if opts.database in ("sqlite", "both"):
        urls.append(f"sqlite:///{tempfile.mkdtemp(prefix='optima-bench-http-db-')}/db.sqlite3")
    if opts.database in ("postgres", "both"):
        if answers("127.0.0.1", 5432):
            urls.append("postgres-scratch")
        elif opts.database == "postgres":
            raise SystemExit("PostgreSQL does not answer at 127.0.0.1:5432 (set BENCH_POSTGRES_URL)")
    if opts.database not in ("sqlite", "postgres", "both"):
        urls.append(opts.database)
    print(f"bench/http_load.py on {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, {time.strftime('%Y-%m-%d')}")
    with RedisServer() as server:
        for url in urls:
            if url == "postgres-scratch":
                with scratch_postgres() as scratch:
                    run_one(scratch, opts, server.url)
            else:
                run_one(url, opts, server.url)
    return 0


class scratch_postgres:
    """A database of its own on the PostgreSQL at 127.0.0.1:5432 (trust auth), dropped afterwards."""

    def __init__(self):
        self.name = f"bench_http_{uuid.uuid4().hex[:8]}"

    def _admin(self, sql):
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as conn:
            conn.execute(sql)

    def __enter__(self):
        self._admin(f"CREATE DATABASE {self.name}")
        return f"postgres://postgres@127.0.0.1:5432/{self.name}"

    def __exit__(self, *exc):
        self._admin(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


if __name__ == "__main__":
    sys.exit(main())
