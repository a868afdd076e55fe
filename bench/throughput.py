"""Worker speed, Redis cost per job, enqueue cost and worker memory: this project against RQ, one run.

    .venv/bin/python bench/throughput.py                   # ~2 minutes on the shared 2-core box
    .venv/bin/python bench/throughput.py --jobs 600 --rounds 31 --worker-rounds 5
    .venv/bin/python bench/throughput.py --profile-enqueue # pyinstrument's call tree of queues.enqueue
    .venv/bin/python bench/throughput.py --enqueue-only    # the enqueue section alone (~20 s)

Everything runs in the same run, on one private redis-server (devtools/redis_server.py), and is
printed as ratios: absolute times are noisy on a shared machine.

Workers are real processes, each run on the same number of jobs of one declared no-op function
(``bench.jobs.noop``, importable without Django, so plain RQ runs the very same function):

  (a) ``manage.py rqworker default --burst``: this project's ``OptimaWorker`` (forks a work horse);
  (b) ``rq.Worker`` (JSON) in a process that ran ``django.setup()`` first (same settings, so its
      work horses fork from an equally big process);
  (c) ``rq.Worker`` (JSON) in a process that never imports Django (for information);
  (d) ``OptimaSimpleWorker`` (no fork): ``manage.py rqworker --no-fork --burst``, or the class
      itself when the command has no such option or still forks (a 10-job trial counts forks);
      "n/a" while the class does not exist;
  (e) ``rq.SimpleWorker`` (JSON) after ``django.setup()``;
  (h) the worker of (a) on ``bench.tasks.noop``, a ``@task`` enqueued with ``noop.enqueue()`` (Django's Tasks
      API on the queues' backend, queues/tasks/): a Task's run against a job's (a/h);
  (f), (g) the workers of (a) and (d) on jobs enqueued with signing skipped (``queues.jobs.signing.sign``
      patched to return "" in the client process), which they run because their
      ``QUEUE_ACCEPT_UNSIGNED_UNTIL`` is an hour ahead (the gate still computes the HMAC to check it).

Our workers' jobs are declared (``QUEUE_JOB_MODULES=bench.jobs``) and, but for (f) and (g), signed
by ``queues.enqueue``; a run counts as failed when a job did not finish, a job of (a)/(d) carries no
signature, or any job was dead-lettered (``unsigned``, ``not_a_job``: the DeadLetter table).

Each worker runs ``--worker-rounds`` times, interleaved (a, f, b, c, d, g, e, a, ...); the table
shows medians, and a ratio is the median of the per-round ratios. Per worker run:
- speed: steady state from the jobs' own ``ended_at`` (RQ stores it in the job hash): the first
  10% of the jobs (start-up) are left out, the rate is (jobs - 1) / (last end - first end);
- Redis per job: between the 20th and the 90th percent of the jobs dequeued, the delta of the
  server's ``INFO commandstats`` (every command, those that Lua scripts call included; this
  script's own polls subtracted) and of the round trips (sends) of the worker's whole process tree
  (``devtools.roundtrips.SharedRoundTrips``: horses and threads included), minus the idle traffic
  of the same worker over as long (its rate measured in a separate idle run of the same worker,
  without --burst), divided by the jobs dequeued in between;
- memory: peak RSS and PSS of the worker's process tree (main process, horse, scheduler), sampled.

Enqueue: ``queues.enqueue`` against plain ``rq.Queue.enqueue`` (JSON) in one Django process, in
interleaved rounds (ours, plain, ours, plain, ...) of the same number of calls; the median of the
per-round ratios, and the round trips per call of each. Bulk: in the same rounds, the same number of
jobs through ``queues.enqueue_many`` in calls of ``MANY_BATCH`` jobs, against as many one-by-one
``queues.enqueue`` calls (the "ours" side): the per-job time ratio, and the round trips per job.

Tasks (6.): in the same enqueue rounds, ``bench.tasks.noop.enqueue()`` against ``queues.enqueue`` of the same
function; their time over each other's.

Signing (5.): in the same enqueue rounds, ``queues.enqueue`` with signing skipped (``sign``
returns "": no ``signature`` field) and with a fixed signature (the job's data built as ``sign``
builds it, a constant 64-hex-digit field written, no HMAC), before ours and plain in even rounds,
after them in odd ones; their time over the signed enqueue's. Worker speed signed / unsigned:
(a)/(f) and (d)/(g). The raw cost: ``signing.sign(job)`` and ``signing.verify(job)`` (on the job
as a worker fetches it) per call by timeit, over the time of one ``queues.enqueue`` and of one job
of (a) and of (d).

This file is also the child processes' program: ``_worker KIND FILE`` (one worker, counting its
round trips and forks) and ``_client`` (a Django process that enqueues on request).
"""

import argparse
import json
import os
import runpy
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.procs import descendants  # noqa: E402
from devtools.redis_server import RedisServer  # noqa: E402
from devtools.roundtrips import RoundTrips, SharedRoundTrips  # noqa: E402

PY = sys.executable
THIS = str(Path(__file__).resolve())
QUEUE = "default"  # declared in optima_site/settings.py (OPTIMA_QUEUES)
JOB = "bench.jobs.noop"
WARM_UP = 0.10  # fraction of the jobs left out of the speed (start-up)
WINDOW = (0.20, 0.90)  # fractions of the jobs dequeued between which Redis traffic is counted
SIMPLE_FACTOR = 4  # fork-free workers are ~10x faster: they get this many times more jobs
MANY_BATCH = 100  # jobs per queues.enqueue_many call in the bulk side of the enqueue rounds


@dataclass
class Kind:
    key: str
    label: str
    ours: bool
    forks: bool
    as_: str = ""  # the worker this kind runs, when another kind's (f, g: a, d with unsigned jobs)
    unsigned: bool = False  # its jobs are enqueued unsigned; its worker accepts them (QUEUE_ACCEPT_UNSIGNED_UNTIL)
    task: bool = False  # its jobs are a @task's, enqueued with Task.enqueue (bench/tasks.py)

    @property
    def role(self):
        return self.as_ or self.key


KINDS = [
    Kind("a", "OptimaWorker (rqworker --burst)", True, True),
    Kind("b", "rq.Worker, in Django", False, True),
    Kind("c", "rq.Worker, no Django", False, True),
    Kind("d", "OptimaSimpleWorker (no fork)", True, False),
    Kind("e", "rq.SimpleWorker, in Django", False, False),
    Kind("f", "(a), unsigned jobs accepted", True, True, as_="a", unsigned=True),
    Kind("g", "(d), unsigned jobs accepted", True, False, as_="d", unsigned=True),
    Kind("h", "(a), @task jobs (Task.enqueue)", True, True, as_="a", task=True),
]
KIND = {k.key: k for k in KINDS}
RUN_ORDER = "afhbcdge"  # each signed/unsigned (and job/task) pair of our worker runs back to back in every round
# QUEUE_ACCEPT_UNSIGNED_UNTIL of the unsigned kinds' workers (an hour after the bench starts, inside
# the 7 days the configuration check queues.W027 allows): their jobs run (the gate's HMAC check still
# done, and failing) instead of being dead-lettered as `unsigned`.
ACCEPT_UNSIGNED_UNTIL = (datetime.now(UTC) + timedelta(hours=1)).isoformat(timespec="seconds")


# -- the roles of the child processes -----------------------------------------------------------
def worker_role(kind, rt_path, burst, use_command):
    """One worker process of ``kind``, counting its process tree's round trips into ``rt_path`` and
    its forks into ``rt_path``.forks."""
    kind = KIND[kind].role
    SharedRoundTrips(rt_path).install()
    forks = os.open(f"{rt_path}.forks", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.register_at_fork(after_in_parent=lambda: os.write(forks, b"."))
    if kind == "a" or (kind == "d" and use_command):
        sys.argv = ["manage.py", "rqworker", QUEUE, "-v", "0"] + (["--no-fork"] if kind == "d" else [])
        sys.argv += ["--burst"] if burst else ["--without-scheduler"]  # a burst worker's scheduler runs once
        runpy.run_path(str(ROOT / "manage.py"), run_name="__main__")
        return
    if kind != "c":
        import django

        django.setup()
    if kind == "d":
        from django_rq.workers import get_worker

        worker = get_worker(
            QUEUE, worker_class="queues.worker.OptimaSimpleWorker", serializer="rq.serializers.JSONSerializer"
        )
        worker.work(burst=burst, with_scheduler=burst, logging_level="WARNING")
        return
    from redis import Redis
    from rq import Queue, SimpleWorker, Worker
    from rq.serializers import JSONSerializer

    connection = Redis.from_url(os.environ["REDIS_URL"])
    worker_class = SimpleWorker if kind == "e" else Worker
    worker = worker_class(
        [Queue(QUEUE, connection=connection, serializer=JSONSerializer)],
        connection=connection,
        serializer=JSONSerializer,
    )
    worker.work(burst=burst, logging_level="WARNING")
    if kind == "c":
        assert "django" not in sys.modules, "the plain RQ worker imported Django"


def client_role():
    """A Django process answering one JSON line per command line: probe, fill, enqueue rounds."""
    import django

    django.setup()
    from redis import Redis
    from rq import Queue
    from rq.serializers import JSONSerializer

    import queues
    from bench.tasks import noop as noop_task
    from queues.jobs import signing

    RoundTrips.install()
    plain = Queue(QUEUE, connection=Redis.from_url(os.environ["REDIS_URL"]), serializer=JSONSerializer)
    sign = signing.sign

    def unsigned(on):
        """Signing skipped (``signing.sign`` returns "": no ``signature`` field is written) or back."""
        signing.sign = (lambda job: "") if on else sign

    def reply(value):
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        command, *args = line.split()
        if command == "probe":
            from django.core.management import load_command_class

            from queues.worker import adapter as worker

            parser = load_command_class("queues", "rqworker").create_parser("manage.py", "rqworker")
            reply(
                {
                    "simple": hasattr(worker, "OptimaSimpleWorker"),
                    "no_fork_option": "--no-fork" in parser._option_string_actions,
                }
            )
        elif command == "fill":  # fill KIND N: N jobs as this kind's users enqueue them
            kind = KIND[args[0]]
            unsigned(kind.unsigned)
            try:
                for _ in range(int(args[1])):
                    if kind.task:
                        noop_task.enqueue()
                    elif kind.ours:
                        queues.enqueue(QUEUE, JOB)
                    else:
                        plain.enqueue(JOB)
            finally:
                unsigned(False)
            reply({"ok": True})
        elif command == "micro":  # micro NUMBER: timeit of signing.sign / signing.verify, seconds per call
            import timeit

            from queues.catalog.lookup import OptimaJob

            written = queues.enqueue(QUEUE, JOB)
            job = OptimaJob.fetch(written.id, connection=plain.connection)  # as the worker has it
            assert job.signature and signing.verify(job), "the enqueued job does not verify"
            number = int(args[0])
            result = {}
            for name, func in (("sign", lambda: signing.sign(written)), ("verify", lambda: signing.verify(job))):
                result[name] = min(timeit.repeat(func, number=number, repeat=7)) / number
            reply(result)
        elif command == "profile":  # profile CALLS: pyinstrument's call tree of queues.enqueue
            from pyinstrument import Profiler

            for _ in range(50):
                queues.enqueue(QUEUE, JOB)
            profiler = Profiler(interval=0.0001)
            with profiler:
                for _ in range(int(args[0])):
                    queues.enqueue(QUEUE, JOB)
            reply(profiler.output_text(unicode=True, color=False, show_all=False))
        elif command == "enqueue":  # enqueue CALLS ROUNDS
            calls, rounds = int(args[0]), int(args[1])
            # ours with signing skipped ("unsigned": sign returns "", no field written), and with a
            # fixed signature ("fixed": the data built as sign builds it, a constant 64-hex-digit field
            # written, no HMAC); such jobs are never run, they only fill this process's rounds.
            variants = {
                "ours": sign,
                "plain": sign,
                "unsigned": lambda job: "",
                "fixed": lambda job: (job.data, "0" * 64)[1],
                "task": sign,
                "task_job": sign,
            }
            many = getattr(queues, "enqueue_many", None)  # absent before it existed: that side is left out
            if many is not None:
                variants["many"] = sign

            def timed(side):
                trips0, cpu0, t0 = RoundTrips.count, time.process_time(), time.perf_counter()
                signing.sign = variants[side]
                try:
                    if side == "many":  # the same number of jobs, MANY_BATCH per call
                        for start in range(0, calls, MANY_BATCH):
                            many(QUEUE, JOB, [()] * min(MANY_BATCH, calls - start))
                    for _ in range(0 if side == "many" else calls):
                        if side == "plain":
                            plain.enqueue(JOB)
                        elif side == "task":
                            noop_task.enqueue()
                        elif side == "task_job":
                            queues.enqueue(QUEUE, noop_task.func)
                        else:
                            queues.enqueue(QUEUE, JOB)
                finally:
                    signing.sign = sign
                return {
                    side: time.perf_counter() - t0,
                    f"{side}_cpu": time.process_time() - cpu0,
                    f"{side}_trips": RoundTrips.count - trips0,
                }

            calls, wanted = 50, calls
            for side in variants:  # warm-up: imports, connections, caches
                timed(side)
            calls = wanted
            results = []
            for n in range(rounds):
                # ours then plain; unsigned and fixed before them in even rounds, after them (reversed)
                # in odd ones: unsigned, fixed, ours, plain, ours, plain, fixed, unsigned, unsigned, ...
                order = (
                    ("unsigned", "fixed", "ours", "plain", "task_job", "task", "many")
                    if n % 2 == 0
                    else ("many", "ours", "plain", "fixed", "unsigned", "task", "task_job")
                )
                order = [side for side in order if side in variants]
                result = {}
                for side in order:
                    result.update(timed(side))
                results.append(result)
            reply(results)
        else:
            reply({"error": f"unknown command {command!r}"})


# -- measuring, in the orchestrating process -----------------------------------------------------
class Client:
    def __init__(self, env, log):
        self.process = subprocess.Popen(
            [PY, THIS, "_client"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
        )

    def call(self, *words):
        self.process.stdin.write(" ".join(str(w) for w in words) + "\n")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Django client process died (exit {self.process.wait()}); see its log")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait(30)


@dataclass
class Snapshot:
    at: float
    dequeued: int
    stats: dict
    trips: int
    own_llen: int


@dataclass
class Run:
    kind: Kind
    jobs: int
    error: str = ""
    rate: float = 0.0  # jobs/s, steady state
    rate_source: str = "ended_at"
    forks: int = 0  # forks of the worker's process tree during the run
    window: tuple = ()  # (first, last) Snapshot
    peak_rss: int = 0  # KiB
    peak_pss: int = 0
    per_job: dict = field(default_factory=dict)  # command -> calls per job, idle traffic subtracted
    trips_per_job: float = 0.0


def fork_count(trips):
    try:
        return os.stat(f"{trips.path}.forks").st_size
    except FileNotFoundError:
        return 0


def tree_memory(root):
    """(RSS, PSS) in KiB of ``root`` and all its descendants, from /proc."""
    pids = descendants(root)
    rss = pss = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fp:
                for line in fp:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return rss, pss


class Bench:
    def __init__(self, server, opts):
        import redis

        self.opts = opts
        self.prefix = f"bench-{uuid.uuid4().hex[:6]}"
        self.tmp = Path(tempfile.mkdtemp(prefix="optima-throughput-"))
        self.redis = redis.Redis.from_url(server.url)
        self.queue_key = f"{self.prefix}:queue:{QUEUE}"
        base = {k: v for k, v in os.environ.items() if k not in ("CACHE_REDIS_URL", "DATABASE_URL")}
        base.pop("QUEUE_ACCEPT_UNSIGNED_UNTIL", None)  # only the unsigned kinds' workers accept unsigned jobs
        self.env = dict(
            base,
            REDIS_URL=server.url,
            QUEUE_PREFIX=self.prefix,
            RQ_KEY_PREFIX=self.prefix,
            LOG_LEVEL="WARNING",
            DJANGO_SETTINGS_MODULE="optima_site.settings",
            OPTIMA_ENV="test",
            DATABASE_URL=f"sqlite:///{self.tmp}/db.sqlite3",
            QUEUE_JOB_MODULES="bench.jobs,bench.tasks",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), base.get("PYTHONPATH")])),
        )
        self.own_llen = 0
        self.idle = {}  # kind key -> ({command: calls/s}, round trips/s)
        self.idle_errors = {}  # kind key -> why its idle traffic is unknown (then nothing is subtracted)
        self.runs = 0
        self.d_by_command = False  # run (d) as `rqworker --no-fork` (else the class, directly)
        self.d_note = ""

    # Redis traffic snapshots; this process's own commands are accounted for in ``delta``.
    def snapshot(self, trips):
        pipe = self.redis.pipeline(transaction=False)
        pipe.llen(self.queue_key)
        pipe.info("commandstats")
        remaining, stats = pipe.execute()
        self.own_llen += 1
        return remaining, Snapshot(
            time.monotonic(),
            0,
            {k[len("cmdstat_") :]: v["calls"] for k, v in stats.items()},
            trips.count(),
            self.own_llen,
        )

    @staticmethod
    def delta(a, b):
        """{command: calls} between two snapshots, less the LLENs and the INFO this process sent."""
        out = {k: b.stats.get(k, 0) - a.stats.get(k, 0) for k in b.stats}
        out["llen"] = out.get("llen", 0) - (b.own_llen - a.own_llen)
        out["info"] = out.get("info", 0) - 1
        return {k: v for k, v in out.items() if v}

    def start_worker(self, kind, trips, burst):
        self.runs += 1
        log = open(self.tmp / f"worker-{kind.key}-{self.runs}.log", "w")
        args = [PY, THIS, "_worker", kind.key, trips.path] + (["--burst"] if burst else [])
        if kind.role == "d" and self.d_by_command:
            args.append("--command")
        env = self.env
        if kind.unsigned:
            # ERROR: the gate's per-job WARNING ("run anyway") would add a log line's cost per job.
            env = dict(env, QUEUE_ACCEPT_UNSIGNED_UNTIL=ACCEPT_UNSIGNED_UNTIL, LOG_LEVEL="ERROR")
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log.name

    def dead_letters(self):
        """{reason: count} of the DeadLetter rows so far (the workers mirror every dead job there)."""
        import sqlite3

        with sqlite3.connect(self.tmp / "db.sqlite3") as db:
            return dict(db.execute("SELECT reason, COUNT(*) FROM queues_deadletter GROUP BY reason").fetchall())

    def stop(self, process):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def measure_idle(self, kind, seconds):
        """Traffic rates of an idle worker of ``kind`` (not --burst), after its start-up."""
        self.redis.flushall()
        trips = SharedRoundTrips(self.tmp / f"trips-idle-{kind.key}")
        process, log = self.start_worker(kind, trips, burst=False)
        try:
            deadline = time.monotonic() + 120
            while not self.redis.scard(f"{self.prefix}:workers"):
                if process.poll() is not None or time.monotonic() > deadline:
                    self.idle_errors[kind.key] = f"idle worker did not start: see {log}"
                    return
                time.sleep(0.05)
            time.sleep(1.0)  # registration done; let the rest of the start-up settle
            _, a = self.snapshot(trips)
            time.sleep(seconds)
            _, b = self.snapshot(trips)
        finally:
            self.stop(process)
        elapsed = b.at - a.at
        self.idle[kind.key] = ({k: v / elapsed for k, v in self.delta(a, b).items()}, (b.trips - a.trips) / elapsed)

    def run_jobs(self, kind, jobs):
        run = Run(kind, jobs)
        self.redis.flushall()
        self.client.call("fill", kind.key, jobs)
        ids = [i.decode() for i in self.redis.lrange(self.queue_key, 0, -1)]
        trips = SharedRoundTrips(self.tmp / f"trips-{kind.key}-{self.runs + 1}")
        marks = [int(jobs * WINDOW[0]), int(jobs * WINDOW[1])]
        snaps = []
        process, log = self.start_worker(kind, trips, burst=True)
        deadline = time.monotonic() + 600
        next_memory = 0.0
        while process.poll() is None:
            moment = time.monotonic()
            if moment > deadline:
                self.stop(process)
                run.error = f"timed out, see {log}"
                return run
            if len(snaps) < 2:
                remaining = self.redis.llen(self.queue_key)
                self.own_llen += 1
                if jobs - remaining >= marks[len(snaps)]:
                    remaining, snap = self.snapshot(trips)
                    snap.dequeued = jobs - remaining
                    snaps.append(snap)
            if moment >= next_memory:
                rss, pss = tree_memory(process.pid)
                run.peak_rss, run.peak_pss = max(run.peak_rss, rss), max(run.peak_pss, pss)
                next_memory = moment + 0.2
            time.sleep(0.005)
        run.forks = fork_count(trips)
        left = self.redis.llen(self.queue_key)
        if process.returncode != 0 or left:
            run.error = f"exit {process.returncode}, {left} jobs left: see {log}"
            return run
        pipe = self.redis.pipeline(transaction=False)
        for job_id in ids:
            pipe.hmget(f"{self.prefix}:job:{job_id}", "ended_at", "status", "signature")
        fields = pipe.execute()
        # Every job ran: its hash says finished, or is gone (retention keeps the last 1,000 completed
        # jobs), none is dead-lettered (the gate's `unsigned` / `not_a_job` included), and the jobs of
        # our signed kinds carry their signature, the others none.
        kept = [(status, signature) for _, status, signature in fields if status is not None]
        finished = sum(1 for status, _ in kept if status == b"finished")
        signed = sum(1 for _, signature in kept if signature)
        expected_signed = len(kept) if kind.ours and not kind.unsigned else 0
        dead = self.dead_letters()
        if len(ids) != jobs or finished != len(kept) or signed != expected_signed or dead:
            run.error = (
                f"{len(ids)} jobs enqueued, {len(kept)} kept, {finished} of them finished, {signed} signed "
                f"({expected_signed} expected), dead letters {dead or 'none'}: see {log}"
            )
            return run
        ends = sorted(datetime.strptime(v.decode(), "%Y-%m-%dT%H:%M:%S.%fZ") for v, _, _ in fields if v)
        used = ends[int(len(ends) * WARM_UP) :]
        if len(snaps) == 2:
            a, b = snaps
            run.window = (a, b)
            done = b.dequeued - a.dequeued
            rates, trip_rate = self.idle.get(kind.role, ({}, 0.0))
            seconds = b.at - a.at
            counts = self.delta(a, b)
            for command in set(counts) | set(rates):
                run.per_job[command] = (counts.get(command, 0) - rates.get(command, 0) * seconds) / done
            run.trips_per_job = (b.trips - a.trips - trip_rate * seconds) / done
        if len(used) >= 10 and used[-1] > used[0]:
            run.rate = (len(used) - 1) / (used[-1] - used[0]).total_seconds()
        elif len(snaps) == 2:  # no timestamps in the job hashes: the window's dequeue rate
            run.rate, run.rate_source = (b.dequeued - a.dequeued) / (b.at - a.at), "dequeue window"
        else:
            run.error = f"no ended_at and no window: see {log}"
        return run


# -- report --------------------------------------------------------------------------------------
def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def verdict(value, ok):
    return "n/a" if value is None else ("PASS" if ok(value) else "MISS")


def fmt(value, spec, missing="n/a"):
    return missing if value is None else format(value, spec)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        kind, rt_path = sys.argv[2], sys.argv[3]
        return worker_role(kind, rt_path, "--burst" in sys.argv, "--command" in sys.argv)
    if len(sys.argv) > 1 and sys.argv[1] == "_client":
        return client_role()

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs",
        type=int,
        default=300,
        help=f"jobs per forking worker run (fork-free runs get {SIMPLE_FACTOR}x as many); default 300",
    )
    parser.add_argument("--rounds", type=int, default=21, help="interleaved enqueue rounds (>= 15); default 21")
    parser.add_argument("--enqueues", type=int, default=300, help="enqueue calls per round and side; default 300")
    parser.add_argument(
        "--worker-rounds",
        type=int,
        default=3,
        help="times each worker runs, interleaved a, b, c, d, e, a, ...; medians; default 3",
    )
    parser.add_argument(
        "--micro",
        type=int,
        default=20000,
        help="calls per timeit repeat of signing.sign / signing.verify (best of 7); default 20000",
    )
    parser.add_argument("--idle", type=float, default=3.0, help="seconds of each idle-traffic measurement; default 3")
    parser.add_argument(
        "--enqueue-only",
        action="store_true",
        help="only the enqueue rounds and the signing micro-benchmark (no workers)",
    )
    parser.add_argument(
        "--profile-enqueue",
        action="store_true",
        help="only print pyinstrument's profile of --enqueues calls of queues.enqueue (requirements-dev)",
    )
    opts = parser.parse_args()
    if opts.jobs < 50:
        parser.error("--jobs must be at least 50")
    if opts.rounds < 15:
        parser.error("--rounds must be at least 15 (the enqueue speed is a median over interleaved rounds)")

    started = time.monotonic()
    with RedisServer() as server:
        bench = Bench(server, opts)
        subprocess.run([PY, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=bench.env, check=True)
        client_log = open(bench.tmp / "client.log", "w")
        bench.client = Client(bench.env, client_log)
        try:
            if opts.profile_enqueue:
                print(bench.client.call("profile", opts.enqueues * 10))
                return
            if opts.enqueue_only:
                enqueue_rounds = bench.client.call("enqueue", opts.enqueues, opts.rounds)
                micro = bench.client.call("micro", opts.micro)
                print(
                    f"\nOptima Queues vs RQ {rq_version()}, one private redis-server; the run took "
                    f"{time.monotonic() - started:.0f} s"
                )
                print_targets(report_enqueue(opts, enqueue_rounds, micro))
                return
            bench.probe = bench.client.call("probe")
            kinds = [KIND[key] for key in RUN_ORDER if KIND[key].role != "d" or bench.probe["simple"]]
            if bench.probe["simple"] and bench.probe["no_fork_option"]:
                # Trust `rqworker --no-fork` only once it is seen not to fork.
                bench.d_by_command = True
                trial = bench.run_jobs(KINDS[3], 10)
                bench.d_by_command = not trial.error and trial.forks == 0
                if not bench.d_by_command:
                    bench.d_note = (
                        f"`rqworker --no-fork` forked {trial.forks} times for 10 jobs"
                        f"{' (' + trial.error + ')' if trial.error else ''}: OptimaSimpleWorker run directly"
                    )
            enqueue_rounds = bench.client.call("enqueue", opts.enqueues, opts.rounds)
            micro = bench.client.call("micro", opts.micro)
            for kind in kinds:
                if not kind.as_:  # an unsigned kind idles as its worker does
                    bench.measure_idle(kind, opts.idle)
            runs = {k.key: [] for k in kinds}
            for _ in range(opts.worker_rounds):
                for kind in kinds:
                    runs[kind.key].append(bench.run_jobs(kind, opts.jobs if kind.forks else opts.jobs * SIMPLE_FACTOR))
        finally:
            bench.client.close()
    report(opts, bench, runs, enqueue_rounds, micro, time.monotonic() - started)
    if bench.idle_errors or any(r.error for rs in runs.values() for r in rs):
        print(f"\nworker logs: {bench.tmp}")
    else:
        shutil.rmtree(bench.tmp, ignore_errors=True)


def report(opts, bench, runs, enqueue_rounds, micro, elapsed):
    def good(key):
        return [r for r in runs.get(key, []) if not r.error]

    def per_job(key):
        """(round trips, commands, {command: calls}) per job, medians over the worker rounds."""
        rs = [r for r in good(key) if r.window]
        if not rs:
            return None, None, {}
        commands = {c: median([r.per_job.get(c, 0.0) for r in rs]) for c in set().union(*(r.per_job for r in rs))}
        return median([r.trips_per_job for r in rs]), sum(commands.values()), commands

    def paired(a, b, f):
        """Median over the worker rounds of f(run a, run b), in the rounds where both ran."""
        return median([f(x, y) for x, y in zip(runs.get(a, []), runs.get(b, [])) if not x.error and not y.error])

    print(
        f"\nOptima Queues vs RQ {rq_version()}, one private redis-server; {opts.worker_rounds} worker round(s) of "
        f"{opts.jobs} jobs (fork-free: {opts.jobs * SIMPLE_FACTOR}) of {JOB}; the run took {elapsed:.0f} s\n"
    )
    print(
        f"{'worker':<44} {'jobs/s':>7} {'trips/job':>9} {'cmds/job':>8} {'forks/job':>9} "
        f"{'peak RSS':>9} {'peak PSS':>9}"
    )
    for kind in KINDS:
        label = kind.label
        if kind.key == "d":  # (g) says "(d), ...": the line above names how (d) ran
            label = "OptimaSimpleWorker (" + ("rqworker --no-fork)" if bench.d_by_command else "class, directly)")
        name = f"({kind.key}) {label}"
        if kind.role == "d" and not bench.probe["simple"]:
            print(f"{name:<44} n/a (not available: queues.worker has no OptimaSimpleWorker)")
            continue
        errors = [r.error for r in runs[kind.key] if r.error]
        if not good(kind.key):
            print(f"{name:<44} failed: {errors[0]}")
            continue
        trips, commands, _ = per_job(kind.key)
        rs = good(kind.key)
        print(
            f"{name:<44} {median([r.rate for r in rs]):>7.1f} {fmt(trips, '.1f'):>9} {fmt(commands, '.1f'):>8} "
            f"{median([r.forks / r.jobs for r in rs]):>9.2f} {median([r.peak_rss for r in rs]) / 1024:>5.0f} MiB "
            f"{median([r.peak_pss for r in rs]) / 1024:>5.0f} MiB"
            + (f"  ({len(errors)} run(s) failed: {errors[0]})" if errors else "")
        )
    if bench.d_note:
        print(f"  (d): {bench.d_note}")
    idle = ", ".join(
        [f"({k}) {sum(v[0].values()):.1f} cmds/s {v[1]:.1f} trips/s" for k, v in bench.idle.items()]
        + [f"({k}) unknown, nothing subtracted ({why})" for k, why in bench.idle_errors.items()]
    )
    print(
        f"  jobs/s: steady state, from the jobs' own ended_at, the first {WARM_UP:.0%} of the jobs left out.\n"
        f"  trips, cmds per job: between {WINDOW[0]:.0%} and {WINDOW[1]:.0%} of the jobs dequeued, the worker tree's "
        f"sends and the server's INFO commandstats (commands that Lua scripts call included), minus the idle "
        f"traffic over as long, measured on each worker idle for {opts.idle:g} s (not --burst): {idle}."
    )

    a_trips, a_cmds, a_by = per_job("a")
    c_trips, c_cmds, c_by = per_job("c")
    d_trips, d_cmds, _ = per_job("d")
    e_trips, e_cmds, _ = per_job("e")
    enqueue_lines = report_enqueue(opts, enqueue_rounds, micro)

    def job_time_share(key):
        """signing.verify's time per call / the job time of ``key`` (1 / its median jobs/s)."""
        rates = [r.rate for r in good(key)]
        return micro["verify"] * median(rates) if rates else None

    lines = [
        (
            "1. speed, forking: ours / stock in Django (a/b)",
            paired("a", "b", lambda x, y: x.rate / y.rate),
            "x",
            ">= 0.95",
            lambda v: v >= 0.95,
        ),
        ("   ours / plain RQ without Django (a/c)", paired("a", "c", lambda x, y: x.rate / y.rate), "x", "", None),
        (
            "1. speed, fork-free: ours / stock in Django (d/e)",
            paired("d", "e", lambda x, y: x.rate / y.rate),
            "x",
            ">= 0.80",
            lambda v: v >= 0.8,
        ),
        (
            "2. round trips per job: ours - plain (a-c)",
            None if a_trips is None or c_trips is None else a_trips - c_trips,
            "+",
            "<= +2",
            lambda v: v <= 2,
        ),
        (
            "2. commands per job: ours / plain (a/c)",
            None if not a_cmds or not c_cmds else a_cmds / c_cmds,
            "x",
            "<= 1.10",
            lambda v: v <= 1.1,
        ),
        (
            "   fork-free: round trips per job (d-e)",
            None if d_trips is None or e_trips is None else d_trips - e_trips,
            "+",
            "",
            None,
        ),
        ("   fork-free: commands per job (d/e)", None if not d_cmds or not e_cmds else d_cmds / e_cmds, "x", "", None),
        *enqueue_lines["3"],
        (
            "4. peak PSS of the worker tree: ours / plain (a/c)",
            paired("a", "c", lambda x, y: x.peak_pss / y.peak_pss),
            "x",
            "",
            None,
        ),
        (
            "   peak RSS of the worker tree: ours / plain (a/c)",
            paired("a", "c", lambda x, y: x.peak_rss / y.peak_rss),
            "x",
            "",
            None,
        ),
        (
            "   peak PSS: ours / stock in Django (a/b)",
            paired("a", "b", lambda x, y: x.peak_pss / y.peak_pss),
            "x",
            "",
            None,
        ),
        *enqueue_lines["5"],
        (
            "5. signing, worker: signed / unsigned jobs/s (a/f)",
            paired("a", "f", lambda x, y: x.rate / y.rate),
            "x",
            "",
            None,
        ),
        ("   fork-free: signed / unsigned jobs/s (d/g)", paired("d", "g", lambda x, y: x.rate / y.rate), "x", "", None),
        ("   signing.verify per call / job time of (a)", job_time_share("a"), "x", "", None),
        ("   signing.verify per call / job time of (d)", job_time_share("d"), "x", "", None),
        *enqueue_lines["6"],
        (
            "6. @task run: task jobs/s / job jobs/s (h/a)",
            paired("h", "a", lambda x, y: x.rate / y.rate),
            "x",
            ">= 0.95",
            lambda v: v >= 0.95,
        ),
    ]
    print_targets(lines)

    if a_by and c_by:
        diff = {c: a_by.get(c, 0.0) - c_by.get(c, 0.0) for c in set(a_by) | set(c_by)}
        more = sorted(((c, d) for c, d in diff.items() if d >= 0.05), key=lambda x: -x[1])
        fewer = sorted(((c, d) for c, d in diff.items() if d <= -0.05), key=lambda x: x[1])
        print("\nper job, by command (INFO commandstats): ours (a) - plain (c)")
        print("  more:  " + (", ".join(f"{c} {d:+.2f}" for c, d in more) or "none"))
        print("  fewer: " + (", ".join(f"{c} {d:+.2f}" for c, d in fewer) or "none"))
        print("  ours:  " + ", ".join(f"{c} {v:.2f}" for c, v in sorted(a_by.items()) if abs(v) >= 0.05))
        print("  plain: " + ", ".join(f"{c} {v:.2f}" for c, v in sorted(c_by.items()) if abs(v) >= 0.05))


def report_enqueue(opts, enqueue_rounds, micro):
    """Print the enqueue table; -> {"3": [...], "5": [...], "6": [...]}, its lines of the targets' table."""
    ours_times = [r["ours"] for r in enqueue_rounds]
    plain_times = [r["plain"] for r in enqueue_rounds]
    speed = statistics.median(p / o for p, o in zip(plain_times, ours_times))
    cpu_speed = statistics.median(r["plain_cpu"] / r["ours_cpu"] for r in enqueue_rounds)
    calls = opts.enqueues
    ours_trips = sum(r["ours_trips"] for r in enqueue_rounds) / (calls * len(enqueue_rounds))
    plain_trips = sum(r["plain_trips"] for r in enqueue_rounds) / (calls * len(enqueue_rounds))
    print(
        f"\n{'enqueue (one Django process, JSON)':<44} {'µs/call':>7} {'trips/call':>10}   "
        f"(medians of {opts.rounds} interleaved rounds of {calls} calls each)"
    )
    print(f"{'queues.enqueue':<44} {statistics.median(ours_times) / calls * 1e6:>7.1f} {ours_trips:>10.2f}")
    print(f"{'rq.Queue.enqueue':<44} {statistics.median(plain_times) / calls * 1e6:>7.1f} {plain_trips:>10.2f}")
    unsigned_times = [r["unsigned"] for r in enqueue_rounds]
    unsigned_trips = sum(r["unsigned_trips"] for r in enqueue_rounds) / (calls * len(enqueue_rounds))
    print(
        f"{'queues.enqueue, signing skipped':<44} {statistics.median(unsigned_times) / calls * 1e6:>7.1f} "
        f"{unsigned_trips:>10.2f}"
    )
    fixed_times = [r["fixed"] for r in enqueue_rounds]
    print(
        f"{'queues.enqueue, fixed signature (no HMAC)':<44} {statistics.median(fixed_times) / calls * 1e6:>7.1f} "
        f"{sum(r['fixed_trips'] for r in enqueue_rounds) / (calls * len(enqueue_rounds)):>10.2f}"
    )
    print(f"  the client's own CPU time per call, plain / ours: {cpu_speed:.3f}x (wall time adds Redis and the wire)")
    ours_call = statistics.median(ours_times) / calls
    print(
        f"  signing.sign(job) {micro['sign'] * 1e6:.2f} µs, signing.verify(job) {micro['verify'] * 1e6:.2f} µs "
        f"per call "
        f"(timeit, best of 7 x {opts.micro}); queues.enqueue {ours_call * 1e6:.1f} µs"
    )

    rounds = len(enqueue_rounds)
    many_lines = []
    if all("many" in r for r in enqueue_rounds):
        many_trips = sum(r["many_trips"] for r in enqueue_rounds) / (calls * rounds)
        print(
            f"{f'queues.enqueue_many, {MANY_BATCH} jobs per call':<44} "
            f"{statistics.median(r['many'] for r in enqueue_rounds) / calls * 1e6:>7.1f} {many_trips:>10.2f}"
            "   (per job)"
        )
        many_lines = [
            (
                "3. bulk: one-by-one time / enqueue_many time, per job",
                statistics.median(r["ours"] / r["many"] for r in enqueue_rounds),
                "x",
                ">= 3",
                lambda v: v >= 3,
            ),
            (
                "   same, the client's CPU time",
                statistics.median(r["ours_cpu"] / r["many_cpu"] for r in enqueue_rounds),
                "x",
                "",
                None,
            ),
            (
                "   bulk round trips per job (one pipeline per call)",
                many_trips,
                "+",
                f"<= {2 / MANY_BATCH:.2f}",
                lambda v: v <= 2 / MANY_BATCH + 1e-9,
            ),
        ]
    return {
        "3": [
            ("3. enqueue speed: plain time / our time", speed, "x", ">= 0.95", lambda v: v >= 0.95),
            ("   same, the client's CPU time", cpu_speed, "x", "", None),
            (
                "3. enqueue round trips per call: ours - plain",
                ours_trips - plain_trips,
                "+",
                "<= 0",
                lambda v: v < 0.01,
            ),
            *many_lines,
        ],
        "5": [
            (
                "5. signing, enqueue: unsigned time / signed time",
                statistics.median(r["unsigned"] / r["ours"] for r in enqueue_rounds),
                "x",
                "",
                None,
            ),
            (
                "   same, the client's CPU time",
                statistics.median(r["unsigned_cpu"] / r["ours_cpu"] for r in enqueue_rounds),
                "x",
                "",
                None,
            ),
            (
                "   fixed signature, no HMAC / signed time",
                statistics.median(r["fixed"] / r["ours"] for r in enqueue_rounds),
                "x",
                "",
                None,
            ),
            ("   signing.sign per call / queues.enqueue per call", micro["sign"] / ours_call, "x", "", None),
        ],
        "6": [
            (
                "6. @task enqueue: Task.enqueue time / queues.enqueue's",
                statistics.median(r["task"] / r["task_job"] for r in enqueue_rounds),
                "x",
                "<= 1.10",
                lambda v: v <= 1.1,
            ),
            (
                "   same, the client's CPU time",
                statistics.median(r["task_cpu"] / r["task_job_cpu"] for r in enqueue_rounds),
                "x",
                "",
                None,
            ),
        ],
    }


def print_targets(lines):
    """The targets' table: ``lines`` of (name, value, unit, target, ok), a dict of such lists, or both."""
    if isinstance(lines, dict):
        lines = [line for group in lines.values() for line in group]
    print(f"\n{'target':<52} {'value':>8}  {'target':<8} result")
    for name, value, unit, target, ok in lines:
        shown = (
            "n/a"
            if value is None
            else (f"{value:+.2f}" if unit == "+" else f"{value:.4f}x" if value < 0.1 else f"{value:.3f}x")
        )
        print(f"{name:<52} {shown:>8}  {target:<8} {verdict(value, ok) if ok else 'info'}")


def rq_version():
    from importlib.metadata import version

    return version("rq")


if __name__ == "__main__":
    main()
