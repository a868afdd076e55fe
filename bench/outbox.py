"""Enqueue cost with and without the outbox (queues/producer/outbox.py), and plain RQ, in one run.

    .venv/bin/python bench/outbox.py                      # SQLite in a temp dir, ~1 minute
    .venv/bin/python bench/outbox.py --database postgres://postgres@127.0.0.1:5432/bench_outbox
    .venv/bin/python bench/outbox.py --rounds 21 --calls 300

One private redis-server (devtools/redis_server.py) and one Django process (the child: this file
with ``_child``), which runs interleaved rounds of ``--calls`` calls of each way to enqueue the
declared no-op job ``bench.jobs.noop`` on queue ``default``:

  plain rq          ``rq.Queue.enqueue`` (JSON), no Django;
  direct            ``queues.enqueue`` outside a transaction (no outbox: fail fast);
  durable           ``queues.enqueue(..., durable=True)`` outside a transaction (a row, the push,
                    the row deleted: three statements in autocommit);
  tx, no outbox     a transaction that writes one row (an ``AuditEntry``), then after its commit a
                    ``queues.enqueue_fail_fast`` (what a view paid before the outbox, minus safety);
  tx + outbox       the same transaction with ``queues.enqueue`` inside it (the outbox row in the
                    transaction, the push and the delete after the commit);
  tx + 10 outbox    ten enqueues in one such transaction, per enqueue.

Printed: per way, the median over rounds of its time per call relative to ``direct`` (and to
plain RQ), and the database statements per call. Ratios, not absolute times: the box is noisy.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WAYS = ("plain rq", "direct", "durable", "tx, no outbox", "tx + outbox", "tx + 10 outbox")


def child(rounds, calls):
    import time

    import django

    django.setup()
    from django.db import connection, transaction
    from rq import Queue

    import queues
    from queues.connection.clients import get_connection
    from queues.models import AuditEntry
    from queues.producer.api import enqueue_fail_fast

    job = "bench.jobs.noop"
    client = get_connection()
    plain = Queue("plain", connection=client)

    def tx_no_outbox():
        with transaction.atomic():
            AuditEntry.objects.create(identity="bench", action="bench")
        enqueue_fail_fast("default", job)

    def tx_outbox():
        with transaction.atomic():
            AuditEntry.objects.create(identity="bench", action="bench")
            queues.enqueue("default", job)

    def tx_ten():
        with transaction.atomic():
            AuditEntry.objects.create(identity="bench", action="bench")
            for _ in range(10):
                queues.enqueue("default", job)

    ways = {
        "plain rq": (lambda: plain.enqueue(job), 1),
        "direct": (lambda: queues.enqueue("default", job), 1),
        "durable": (lambda: queues.enqueue("default", job, durable=True), 1),
        "tx, no outbox": (tx_no_outbox, 1),
        "tx + outbox": (tx_outbox, 1),
        "tx + 10 outbox": (tx_ten, 10),
    }
    for func, _ in ways.values():  # warm up: imports, connections, compiled queries
        func()
    times = {name: [] for name in ways}
    for r in range(rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            func, per = ways[name]
            n = max(1, calls // per)
            started = time.perf_counter()
            for _ in range(n):
                func()
            times[name].append((time.perf_counter() - started) / (n * per))
        client.flushdb()
        AuditEntry.objects.all().delete()
    # Statements per call (transaction control included), counted once with a debug cursor.
    statements = {}
    connection.force_debug_cursor = True
    for name, (func, per) in ways.items():
        connection.queries_log.clear()
        func()
        statements[name] = len(connection.queries) / per
    connection.force_debug_cursor = False
    print(json.dumps({"times": times, "statements": statements, "vendor": connection.vendor}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="enqueues per round and way")
    parser.add_argument("--database", default=None, help="DATABASE_URL (default: SQLite in a temp dir)")
    opts = parser.parse_args()

    from devtools.redis_server import RedisServer

    workdir = tempfile.mkdtemp(prefix="optima-bench-outbox-")
    database = opts.database or f"sqlite:///{workdir}/db.sqlite3"
    with RedisServer() as server:
        env = {k: v for k, v in os.environ.items() if k not in ("QUEUE_ACCEPT_UNSIGNED_UNTIL",)}
        env.update(
            REDIS_URL=server.url,
            DATABASE_URL=database,
            OPTIMA_ENV="test",
            QUEUE_PREFIX="bench",
            QUEUE_JOB_MODULES="bench.jobs",
            DJANGO_SETTINGS_MODULE="optima_site.settings",
        )
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], check=True, env=env, cwd=ROOT)
        out = subprocess.run(
            [sys.executable, __file__, "_child", str(opts.rounds), str(opts.calls)],
            check=True,
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout
    data = json.loads(out.strip().splitlines()[-1])
    times = data["times"]

    def ratio(name, base):
        return statistics.median(a / b for a, b in zip(times[name], times[base]))

    print(f"database: {data['vendor']}; {opts.rounds} rounds x {opts.calls} enqueues per way (medians)\n")
    print("| way | time vs direct | time vs plain rq | DB statements per enqueue |")
    print("| --- | ---: | ---: | ---: |")
    for name in WAYS:
        print(
            f"| {name} | {ratio(name, 'direct'):.2f}x | {ratio(name, 'plain rq'):.2f}x | {data['statements'][name]:g} |"
        )
    print(
        f"\ntx + outbox vs tx, no outbox: {ratio('tx + outbox', 'tx, no outbox'):.2f}x "
        "(what the outbox adds to a view that writes a row and enqueues)"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
