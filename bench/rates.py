"""What a rate limit (``limit_rate``, queues/producer/rates.py) costs the worker: Redis round trips per job.

    .venv/bin/python bench/rates.py                 # ~10 s
    .venv/bin/python bench/rates.py --few 10 --many 110

One private redis-server (devtools/redis_server.py) and one Django process (this file with ``_child``;
SQLite in a temp dir). Per way, ``--few`` then ``--many`` no-op jobs are enqueued, then run by an
``OptimaSimpleWorker`` in the process (``work(burst=True)``, no scheduler) whose round trips are counted
(``devtools.roundtrips.RoundTrips``: one per command, one per pipeline); a job's cost is the difference of
the two runs over ``many - few`` (the worker's start and end cancel out). Ways:

  plain        ``queues.enqueue("default", "bench.jobs.noop")``;
  rate         the same with ``limit_key=f"k{i}", limit_rate="10/s"``: one key per job, so each is released
               onto the queue by its own enqueue (the rate is charged at the release, never by the worker);
  concurrency  ``limit_key=f"k{i}", limit_concurrency=1`` (rq's slot, released by rq after the success write),
               for comparison.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WAYS = {
    "plain": {},
    "rate": {"limit_rate": "10/s"},
    "concurrency": {"limit_concurrency": 1},
}


def child(few, many):
    import django

    django.setup()
    import queues
    from devtools.roundtrips import RoundTrips
    from queues.catalog.lookup import get_queue
    from queues.connection.clients import get_connection
    from queues.worker import adapter

    RoundTrips.install()
    client = get_connection()

    def run(way, n):
        options = WAYS[way]
        for i in range(n):
            extra = {"limit_key": f"{way}-{n}-{i}", **options} if options else {}
            queues.enqueue("default", "bench.jobs.noop", **extra)
        assert client.llen(get_queue("default").key) == n, "every job released onto the queue"
        worker = adapter.OptimaSimpleWorker([get_queue("default", connection=client)], connection=client)
        before = RoundTrips.count
        worker.work(burst=True, with_scheduler=False, logging_level="WARNING")
        return RoundTrips.count - before

    run("plain", 5)  # warm up: imports, connections, compiled scripts
    found = {}
    for way in WAYS:
        found[way] = (run(way, many) - run(way, few)) / (many - few)
        client.flushdb()
    print(json.dumps(found))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--few", type=int, default=10)
    parser.add_argument("--many", type=int, default=110)
    opts = parser.parse_args()

    from devtools.redis_server import RedisServer

    workdir = tempfile.mkdtemp(prefix="optima-bench-rates-")
    with RedisServer() as server:
        env = dict(os.environ)
        env.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)
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
            [sys.executable, __file__, "_child", str(opts.few), str(opts.many)],
            check=True,
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    print(f"`python3 bench/rates.py --few {opts.few} --many {opts.many}`: round trips per job of the worker")
    print()
    print("| job | round trips per job |")
    print("| --- | ---: |")
    for way, value in found.items():
        print(f"| {way} | {value:.2f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        child(int(sys.argv[2]), int(sys.argv[3]))
    else:
        main()
