"""What SCAN finds outside the environment prefix after a job lifecycle: plain RQ vs this project.

    .venv/bin/python bench/key_isolation.py

Starts a private redis-server, then runs the same lifecycle twice — enqueue, a failing job, a delayed
job, a worker with RQ's scheduler, an rq-scheduler periodic job:
1. "before": stock rq + rq-scheduler as django-rq sets them up (no prefix support);
2. "after": this project's queues app with QUEUE_PREFIX=optima (manage.py rqworker / rqscheduler).
It prints every key pattern (ids folded to <id>) that is NOT under `optima:`.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from devtools.redis_server import RedisServer  # noqa: E402

PLAIN = r"""
import datetime as dt, time
from redis import Redis
from rq import Queue, Worker
from rq_scheduler import Scheduler
conn = Redis.from_url(URL)
q = Queue("default", connection=conn)
q.enqueue("os.getpid")
q.enqueue("os.listdir", "/nonexistent")
q.enqueue_in(dt.timedelta(seconds=1), "os.getpid")
s = Scheduler(queue=q, connection=conn)
s.schedule(dt.datetime.now(dt.timezone.utc), "os.getpid", interval=60, id="periodic-1")
s.enqueue_jobs()
time.sleep(1.5)
Worker([q], connection=conn).work(burst=True, with_scheduler=True)
time.sleep(1.2)
Worker([q], connection=conn).work(burst=True, with_scheduler=True)
"""


def patterns(client, outside_of):
    found = set()
    for key in client.scan_iter(count=1000):
        key = key.decode()
        if outside_of and key.startswith(outside_of + ":"):
            continue
        found.add(re.sub(r"[0-9a-f]{32}|[0-9a-f-]{36}|[^:]+\.\d+(?=$)|\d{6,}", "<id>", key))
    return sorted(found)


def main():
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        env = {k: v for k, v in os.environ.items() if k not in ("RQ_KEY_PREFIX", "QUEUE_PREFIX")}
        subprocess.run(
            [sys.executable, "-c", f"URL={server.url!r}\n" + PLAIN], check=True, env=env, cwd=ROOT, capture_output=True
        )
        before = patterns(client, "optima")
        client.flushall()

        # Only declared jobs run (queues/catalog/jobs.py): the same lifecycle with tests.jobs.sample's
        # whoami (os.getpid) and fail, enqueued (and signed) by queues.enqueue.
        env = dict(
            env,
            REDIS_URL=server.url,
            QUEUE_PREFIX="optima",
            OPTIMA_ENV="test",
            DATABASE_URL=f"sqlite:///{tempfile.mkdtemp()}/db.sqlite3",
            QUEUE_JOB_MODULES="tests.jobs",
        )
        env.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)
        py = sys.executable
        subprocess.run([py, "manage.py", "migrate", "-v", "0"], check=True, env=env, cwd=ROOT)
        code = (
            "import django; django.setup(); import queues, datetime as dt;"
            "queues.enqueue('default', 'tests.jobs.sample.whoami');"
            "queues.enqueue('default', 'tests.jobs.sample.fail', attempts=1);"
            "queues.enqueue('default', 'tests.jobs.sample.whoami', delay=1)"
        )
        subprocess.run(
            [py, "-c", code], check=True, env=dict(env, DJANGO_SETTINGS_MODULE="optima_site.settings"), cwd=ROOT
        )
        sched = subprocess.Popen(
            [py, "manage.py", "rqscheduler", "--interval", "1"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.5)
        subprocess.run(
            [py, "manage.py", "rqworker", "--burst"],
            check=True,
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.2)
        subprocess.run(
            [py, "manage.py", "rqworker", "--burst"],
            check=True,
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        sched.send_signal(signal.SIGTERM)
        sched.wait(30)
        after = patterns(client, "optima")
        inside = len(list(client.scan_iter(match="optima:*")))

    print(f"before (stock rq + rq-scheduler): {len(before)} key patterns outside 'optima:'")
    for p in before:
        print("   ", p)
    print(
        f"after (queues app, QUEUE_PREFIX=optima): {len(after)} key patterns outside 'optima:' ({inside} keys inside)"
    )
    for p in after:
        print("   ", p)
    return 1 if after else 0


if __name__ == "__main__":
    sys.exit(main())
