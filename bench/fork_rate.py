"""Steady-state jobs/s of one burst ``rqworker default`` on N no-op jobs, for a checkout: to compare two
commits of the worker alternated on the same box (bench/README.md, throughput.py's forking shortfall).

    .venv/bin/python bench/fork_rate.py /path/to/checkout 300              # forking
    .venv/bin/python bench/fork_rate.py /path/to/checkout 1000 --no-fork   # arguments after N go to rqworker

The checkout's own ``.venv`` runs its ``manage.py``: migrate a fresh SQLite database, enqueue N
``bench.jobs.noop`` with ``queues.enqueue``, run the worker in burst mode, then read the jobs' ``ended_at``
(the first 10 % left out, as throughput.py does). Redis: ``REDIS_URL`` (default the machine's
127.0.0.1:6379) under a fresh ``QUEUE_PREFIX``.
"""

import os
import subprocess
import sys
import tempfile
import uuid

READ = """
import json
from rq.job import Job
from queues.catalog.lookup import get_queue
q = get_queue('default')
ends = sorted(Job.fetch(i, connection=q.connection, serializer=q.serializer).ended_at.timestamp()
              for i in json.loads(IDS))
k = len(ends) // 10
print((len(ends) - k - 1) / (ends[-1] - ends[k]))
"""


def main(checkout, jobs, worker_args):
    tmp = tempfile.mkdtemp()
    env = dict(
        os.environ,
        OPTIMA_ENV="test",
        QUEUE_PREFIX=f"forkrate-{uuid.uuid4().hex[:6]}",
        REDIS_URL=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
        QUEUE_JOB_MODULES="bench.jobs",
        DATABASE_URL=f"sqlite:///{tmp}/db.sqlite3",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="optima_site.settings",
    )
    python = os.path.join(checkout, ".venv", "bin", "python")

    def manage(*args, **kwargs):
        return subprocess.run(
            [python, "manage.py", *args], cwd=checkout, env=env, check=True, capture_output=True, text=True, **kwargs
        ).stdout

    manage("migrate", "-v0")
    enqueue = (
        f"import queues, json; print(json.dumps([queues.enqueue('default', 'bench.jobs.noop').id "
        f"for _ in range({jobs})]))"
    )
    ids = manage("shell", "-c", enqueue).strip().splitlines()[-1]
    manage("rqworker", "default", "--burst", *worker_args)
    rate = float(manage("shell", "-c", f"IDS = {ids!r}\n{READ}").strip().splitlines()[-1])
    print(f"{rate:.1f} jobs/s")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
