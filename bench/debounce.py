"""Enqueue cost of a debounce or throttle key (queues/producer/dedupe.py) against a plain enqueue, in one run.

    .venv/bin/python bench/debounce.py                    # ~30 s
    .venv/bin/python bench/debounce.py --rounds 21 --calls 500

One private redis-server (devtools/redis_server.py) and one Django process (this file with ``_child``),
which runs interleaved rounds of ``--calls`` enqueues of the declared no-op job ``bench.jobs.noop`` on
queue ``default``, each way:

  plain                ``queues.enqueue`` (one MULTI: the job queued now);
  delayed              ``queues.enqueue(..., delay=30)`` (one MULTI: the job scheduled);
  debounce, same key   ``debounce_key="k"``: the window's pending job has its arguments replaced (the
                       steady state of one process editing: one Lua call);
  debounce, new keys   a new ``debounce_key`` per call: each opens a window (one Lua call writing the job);
  throttle, same key   ``throttle_key="k"``: dropped, answered with the window's job (Lua call + its fetch);
  throttle, new keys   a new ``throttle_key`` per call: each writes its job.

Printed: per way, the median over rounds of its time per call relative to ``plain``, and the Redis
round trips per call (client side). Ratios, not absolute times: the box is noisy. Issue 35's target:
an enqueue with a debounce key <= 1.3x a plain enqueue.
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

WAYS = ("plain", "delayed", "debounce, same key", "debounce, new keys", "throttle, same key", "throttle, new keys")


def child(rounds, calls):
    import itertools
    import time

    import django

    django.setup()
    import redis

    import queues
    from queues.connection.clients import get_connection

    job = "bench.jobs.noop"
    client = get_connection()
    fresh = itertools.count()
    ways = {
        "plain": lambda: queues.enqueue("default", job),
        "delayed": lambda: queues.enqueue("default", job, delay=30),
        "debounce, same key": lambda: queues.enqueue("default", job, debounce_key="k", debounce_seconds=30),
        "debounce, new keys": lambda: queues.enqueue(
            "default", job, debounce_key=f"k{next(fresh)}", debounce_seconds=30
        ),
        "throttle, same key": lambda: queues.enqueue("default", job, throttle_key="k", throttle_seconds=30),
        "throttle, new keys": lambda: queues.enqueue(
            "default", job, throttle_key=f"k{next(fresh)}", throttle_seconds=30
        ),
    }
    for func in ways.values():  # warm up: imports, connections, scripts loaded
        func()
    times = {name: [] for name in ways}
    for r in range(rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            func = ways[name]
            started = time.perf_counter()
            for _ in range(calls):
                func()
            times[name].append((time.perf_counter() - started) / calls)
        client.flushdb()
        for func in ways.values():  # the same-key ways start each round with their window open
            func()
    # Round trips per call: the client's socket sends, counted once per way (a window already open).
    trips = {}
    sent = [0]
    original = redis.connection.Connection.send_packed_command

    def counting(self, command, check_health=True):
        sent[0] += 1
        return original(self, command, check_health)

    redis.connection.Connection.send_packed_command = counting
    for name, func in ways.items():
        sent[0] = 0
        for _ in range(10):
            func()
        trips[name] = sent[0] / 10
    redis.connection.Connection.send_packed_command = original
    print(json.dumps({"times": times, "trips": trips}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=300, help="enqueues per round and way")
    opts = parser.parse_args()

    from devtools.redis_server import RedisServer

    workdir = tempfile.mkdtemp(prefix="optima-bench-debounce-")
    with RedisServer() as server:
        env = {k: v for k, v in os.environ.items() if k not in ("QUEUE_ACCEPT_UNSIGNED_UNTIL",)}
        env.update(
            REDIS_URL=server.url,
            DATABASE_URL=f"sqlite:///{workdir}/db.sqlite3",
            OPTIMA_ENV="test",
            QUEUE_PREFIX="bench",
            QUEUE_JOB_MODULES="bench.jobs",
            DJANGO_SETTINGS_MODULE="optima_site.settings",
        )
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

    def ratio(name):
        return statistics.median(a / b for a, b in zip(times[name], times["plain"]))

    print(f"{opts.rounds} rounds x {opts.calls} enqueues per way (medians)\n")
    print("| way | time vs plain | µs per enqueue | round trips per enqueue |")
    print("| --- | ---: | ---: | ---: |")
    for name in WAYS:
        micros = statistics.median(times[name]) * 1e6
        print(f"| {name} | {ratio(name):.2f}x | {micros:.0f} | {data['trips'][name]:g} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
