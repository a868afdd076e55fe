"""The systems bench/peers.py compares: how each one's worker is started, in which virtual environment.

Every worker is a real process tree started from a command line, the way its users start it, with
the environment ``Env.for_system`` builds (one private redis-server for all, flushed between runs).
This project's and stock rq's run in the app's ``.venv`` (the same rq, 3.0, and redis-py); Celery,
dramatiq, arq and taskiq in the bench's own (``requirements-bench.txt``: arq 0.28 needs redis-py < 6).
Workload C gives the worker another Redis URL (the delay proxy's): ``Env.for_system(..., redis_url=...)``.
"""

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP_BIN = ROOT / ".venv" / "bin"
PEERS_VENV = ROOT / "bench" / ".venv-peers"
PEERS_BIN = PEERS_VENV / "bin"
QUEUE = "default"  # declared in optima_site/settings.py (OPTIMA_QUEUES)


@dataclass(frozen=True)
class System:
    key: str
    label: str
    family: str  # the producer (bench/peer_jobs/produce.py): ours, rq, celery, dramatiq, arq, taskiq
    argv: tuple  # the worker's command; "{python}", "{bin}", "{c}" filled in
    concurrency: int = 1  # jobs at once in one process (pool: per member)
    processes: int = 1
    needs: str = ""  # an option the command must offer ("--concurrency"), else the row is n/a
    coroutines: bool = False  # ours: the jobs are the ``async def`` ones (bench.peer_jobs.ours.*_async)
    env: tuple = ()  # (name, value) pairs the worker's and the producer's environment get on top

    @property
    def producer(self):
        """The producer's first argument (bench/peer_jobs/produce.py): the family, ``ours-async`` for coroutines."""
        return f"{self.family}-async" if self.coroutines else self.family

    @property
    def peers_venv(self):
        return self.family in ("celery", "dramatiq", "arq", "taskiq")

    @property
    def async_jobs(self):
        """Its jobs are ``async def`` on one event loop: the systems of workload B-async."""
        return self.coroutines or self.family in ("arq", "taskiq")

    @property
    def serial(self):
        """Runs one job at a time per process: workload B (100 ms a job) gets fewer jobs."""
        return self.concurrency == 1

    def command(self, concurrency, redis_url):
        python = str((PEERS_BIN if self.peers_venv else APP_BIN) / "python")
        binary = str(PEERS_BIN if self.peers_venv else APP_BIN)
        return [a.format(python=python, bin=binary, c=concurrency, redis=redis_url) for a in self.argv]

    def name(self, concurrency):
        return self.label.format(c=concurrency)


MANAGE = ("{python}", "manage.py")
OURS = MANAGE + ("rqworker", QUEUE, "-v", "0", "--without-scheduler")
RQ = ("{bin}/rq", "worker", "--url", "{redis}", "--serializer", "rq.serializers.JSONSerializer", "-q")

CELERY_APP = ("{bin}/celery", "-A", "bench.peer_jobs.celery_app")
CELERY = CELERY_APP + ("worker", "--pool", "threads", "--concurrency", "{c}", "-l", "WARNING")  # celery, celery-late

SYSTEMS = [
    System("ours-fork", "ours: rqworker (forks a horse per job)", "ours", OURS),
    System("ours-nofork", "ours: rqworker --no-fork", "ours", OURS + ("--no-fork",)),
    System(
        "ours-c32",
        "ours: rqworker --concurrency {c}",
        "ours",
        OURS + ("--concurrency", "{c}"),
        concurrency=32,
        needs="--concurrency",
    ),
    System(
        "ours-async",
        "ours: rqworker --async {c}",
        "ours",
        OURS + ("--async", "{c}"),
        concurrency=32,
        needs="--async",
        coroutines=True,
    ),
    System(
        "ours-pool2",
        "ours: rqworker-pool --num-workers 2",
        "ours",
        MANAGE + ("rqworker-pool", QUEUE, "--num-workers", "2", "-v", "0", "--without-scheduler"),
        processes=2,
    ),
    System("rq", "rq: Worker (forks a horse per job)", "rq", RQ + (QUEUE,)),
    System("rq-simple", "rq: SimpleWorker", "rq", RQ + ("--worker-class", "rq.SimpleWorker", QUEUE)),
    System(
        "celery",
        "Celery: --pool threads --concurrency {c}",
        "celery",
        CELERY,
        concurrency=32,
    ),
    System(
        "celery-late",
        "Celery: --pool threads --concurrency {c}, acks_late",
        "celery",
        CELERY,
        concurrency=32,
        env=(("BENCH_CELERY_ACKS_LATE", "1"),),  # at-least-once, as ours: issue 36's A target
    ),
    System(
        "dramatiq",
        "dramatiq: --processes 1 --threads {c}",
        "dramatiq",
        ("{bin}/dramatiq", "bench.peer_jobs.dramatiq_jobs", "--processes", "1", "--threads", "{c}"),
        concurrency=32,
    ),
    System(
        "arq",
        "arq: max_jobs={c} (asyncio)",
        "arq",
        ("{bin}/arq", "bench.peer_jobs.arq_jobs.WorkerSettings"),
        concurrency=32,
    ),
    System(
        "taskiq",
        "taskiq: --workers 1 --max-async-tasks {c} (asyncio)",
        "taskiq",
        (
            "{bin}/taskiq",
            "worker",
            "bench.peer_jobs.taskiq_jobs:broker",
            "--workers",
            "1",
            "--max-async-tasks",
            "{c}",
            "--log-level",
            "WARNING",
        ),
        concurrency=32,
    ),
]
BY_KEY = {s.key: s for s in SYSTEMS}


def command_offers(option, command="rqworker"):
    """Whether ``manage.py <command>`` has ``option`` (its --help, in the app's venv)."""
    out = subprocess.run(
        [str(APP_BIN / "python"), "manage.py", command, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=dict(os.environ, OPTIMA_ENV="test"),
    )
    return option in out.stdout


@dataclass
class Env:
    """The environment every process of a run gets."""

    redis_url: str
    http_url: str
    tmp: Path
    prefix: str

    def base(self, record_dir):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("CACHE_REDIS_URL", "DATABASE_URL", "QUEUE_ACCEPT_UNSIGNED_UNTIL", "VIRTUAL_ENV")
        }
        return dict(
            env,
            BENCH_REDIS_URL=self.redis_url,
            BENCH_HTTP_URL=self.http_url,
            BENCH_RECORD_DIR=str(record_dir),
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        )

    def for_system(self, system, record_dir, concurrency, redis_url=None):
        """``redis_url``: the worker's Redis when not ``self.redis_url`` (workload C: the delay proxy)."""
        env = self.base(record_dir)
        env["BENCH_CONCURRENCY"] = str(concurrency)
        if redis_url:
            env["BENCH_REDIS_URL"] = redis_url
        if system.family == "ours":
            env.update(
                REDIS_URL=redis_url or self.redis_url,
                QUEUE_PREFIX=self.prefix,
                RQ_KEY_PREFIX=self.prefix,
                LOG_LEVEL="WARNING",
                DJANGO_SETTINGS_MODULE="optima_site.settings",
                OPTIMA_ENV="test",
                DATABASE_URL=f"sqlite:///{self.tmp}/db.sqlite3",
                QUEUE_JOB_MODULES="bench.peer_jobs.ours",
            )
        env.update(system.env)
        return env
