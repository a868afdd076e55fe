"""pyinstrument's call tree of this project's worker draining peers.py's jobs, in-process (issue 21).

    .venv/bin/python bench/profile_worker.py A --jobs 3000              # rqworker --no-fork, no-op jobs
    .venv/bin/python bench/profile_worker.py B --jobs 1000 --concurrency 32   # 100 ms HTTP jobs, 32 at once
    .venv/bin/python bench/profile_worker.py A --jobs 3000 --concurrency 32 --html /tmp/a.html
    .venv/bin/python bench/profile_worker.py B --jobs 3000 --concurrency 32 --cycle   # a slot's cycle, no profiler
    .venv/bin/python bench/profile_worker.py A --jobs 3000 --async 64    # rqworker --async 64, async def no-op jobs
    .venv/bin/python bench/profile_worker.py B --jobs 5000 --async 500 --cycle   # a slot's cycle at --async 500
    .venv/bin/python bench/profile_worker.py A --jobs 10000 --async 500 --nap 0.1 --steps   # CPU a job, by step

One private redis-server and (for B) peers.py's HTTP server; the jobs (``bench.peer_jobs.ours``)
enqueued with ``queues.enqueue_many`` before the worker starts; then ``manage.py rqworker --burst``
runs in this process under pyinstrument. With ``--concurrency`` > 1 every job's thread is profiled
too, and the threads' trees are shown merged (the main thread's first). Prints the jobs/s of the
profiled run (pyinstrument slows it down: read the shares, not the rate).

``--cycle`` runs no profiler: it times, in every job thread of ``--concurrency`` N, the steps from
one job's start to the next one's (the job's own function, its success recorded, the wait for the
next job, its handover), and the main thread's pop and vetting of each job; medians and means, the
first 10 % left out. It is what says where a slot's time beyond the job's own 100 ms goes.

``--steps`` runs no profiler either: it adds up the CPU time (``time.thread_time()``: the calling thread's
user and system time, so a wait costs nothing and a wake-up what the kernel charges) of each step of the
per-job path, in whichever thread runs it, and prints it per job beside the whole process's. Nested steps are
shown under the step that calls them (one "· " a level). ``--nap S`` (with ``--async``): bench/async_jobs.py's
job, a coroutine that waits S seconds, instead of the workload's.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup(workload, tmp, redis_url, http_url):
    os.environ.update(
        REDIS_URL=redis_url,
        QUEUE_PREFIX=f"prof-{uuid.uuid4().hex[:6]}",
        LOG_LEVEL="WARNING",
        DJANGO_SETTINGS_MODULE="optima_site.settings",
        OPTIMA_ENV="test",
        DATABASE_URL=f"sqlite:///{tmp}/db.sqlite3",
        QUEUE_JOB_MODULES="bench.peer_jobs.ours",
        BENCH_RECORD_DIR=tmp,
        BENCH_HTTP_URL=http_url or "http://127.0.0.1:1/wait",
    )
    os.environ["RQ_KEY_PREFIX"] = os.environ["QUEUE_PREFIX"]
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def enqueue(jobs, workload, coroutines=False, nap=None):
    import queues
    from bench.peer_jobs import ours

    func = ours.noop if workload == "A" else ours.io
    if coroutines:
        func = ours.noop_async if workload == "A" else ours.io_async
    extra = ()
    if nap is not None:
        func, extra = ours.nap_async, (nap,)
    for start in range(0, jobs, 500):
        queues.enqueue_many("default", func, [(time.time(), *extra) for _ in range(min(500, jobs - start))])


# (owner module or class path, attribute, depth): the per-job steps ``--steps`` times, in the order printed
STEPS = (
    ("queues.worker.concurrent:OptimaConcurrentWorker", "run_in_thread", 0),
    ("queues.worker.attempt", "begin", 1),
    ("queues.jobs.execution:Execution", "create", 2),
    ("queues.jobs.execution", "started_into", 2),
    ("queues.connection.batch", "execute", 2),
    ("queues.worker.adapter:WorkerBehaviour", "perform_job", 1),
    ("queues.worker.attempt", "mark_started", 2),
    ("queues.worker.attempt", "mark_succeeded", 2),
    ("queues.events.hooks", "before_success_write", 3),
    ("queues.worker.fastpath", "finish", 3),
    ("rq.job:Job", "save", 4),
    ("queues.jobs.stream", "record", 4),
    ("queues.connection.batch", "execute_multi", 4),
    ("queues.events.hooks", "after_success", 3),
    ("queues.connection.combine:Combiner", "run", 0),
    ("queues.connection.combine:Combiner", "_send", 1),
)


LOOP = "the event loop's thread"


def timed_steps():
    """Wrap each of ``STEPS`` with a count of its thread's CPU time; -> the totals {(owner, attr): seconds}."""
    import importlib

    totals = {}
    lock = threading.Lock()

    def wrap(owner, attr, label):
        original = getattr(owner, attr)

        def wrapped(*args, **kwargs):
            started = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.thread_time() - started
                with lock:
                    totals[label] = totals.get(label, 0.0) + spent

        setattr(owner, attr, wrapped)

    for path, attr, _depth in STEPS:
        module, _, cls = path.partition(":")
        owner = importlib.import_module(module)
        if cls:
            owner = getattr(owner, cls)
        wrap(owner, attr, (path, attr))
    from queues.worker import eventloop

    wrap(eventloop.LoopThread, "_run", LOOP)  # the loop's whole life: one call, in its own thread
    return totals


def steps_table(totals, jobs, main_cpu, process_cpu):
    print(f"| step | CPU ms a job |\n| --- | ---: |\n| the process | {1000 * process_cpu / jobs:.3f} |")
    print(f"| the main thread | {1000 * main_cpu / jobs:.3f} |")
    loop = totals.get(LOOP)
    if loop is not None:
        print(f"| {LOOP} | {1000 * loop / jobs:.3f} |")
    for path, attr, depth in STEPS:
        spent = totals.get((path, attr))
        if spent is not None:
            name = f"{path.rpartition(':')[2] if ':' in path else path.rpartition('.')[2]}.{attr}"
            print(f"| {'· ' * depth}{name} | {1000 * spent / jobs:.3f} |")


def profiled_threads(sessions):
    """Profile every job's thread of the concurrent worker (pyinstrument profiles one thread)."""
    from pyinstrument import Profiler

    from queues.worker.concurrent import OptimaConcurrentWorker

    original = OptimaConcurrentWorker.run_in_thread
    lock = threading.Lock()

    def run_in_thread(self, slot):
        profiler = Profiler(interval=0.0005)
        profiler.start()
        try:
            return original(self, slot)
        finally:
            session = profiler.stop()
            with lock:
                sessions.append(session)

    OptimaConcurrentWorker.run_in_thread = run_in_thread


def timed_cycle():
    """Wrap the per-job steps of the concurrent worker with clocks; -> the events list (name, t, thread)."""
    from bench.peer_jobs import ours
    from queues.worker import attempt, concurrent, eventloop, fastpath, intake

    events = []

    def mark(name):
        events.append((name, time.perf_counter(), threading.get_ident()))

    def wrap(owner, attr, before, after=None):
        original = getattr(owner, attr)

        def wrapped(*args, **kwargs):
            mark(before)
            try:
                return original(*args, **kwargs)
            finally:
                if after:
                    mark(after)

        setattr(owner, attr, wrapped)

    wrap(concurrent.OptimaConcurrentWorker, "run_in_thread", "thread takes the job")
    wrap(concurrent.OptimaConcurrentWorker, "execute_job", "main: start it, hand it over", "main: handed over")
    wrap(attempt, "begin", "start: one call", "started")
    wrap(fastpath, "finish", "success: one call", "success recorded")
    wrap(eventloop.LoopThread, "submit", "coroutine handed to the loop")
    wrap(ours, "io_call", "the job's GET", "the job's answer")
    wrap(intake.Intake, "next_job", "main: wait for a slot, pop, vet", "main: job popped and vetted")
    return events


def cycle_table(events):
    """Per thread, the time from each event to the next one of the same thread; medians and means."""
    import collections
    import statistics

    by_thread = collections.defaultdict(list)
    for event in events:
        by_thread[event[2]].append(event)
    steps = collections.defaultdict(list)
    for evs in by_thread.values():
        for a, b in zip(evs, evs[1:]):
            steps[(a[0], b[0])].append(b[1] - a[1])
    rows = []
    for (a, b), values in steps.items():
        values = values[len(values) // 10 :]
        if len(values) >= 10:
            rows.append((statistics.mean(values), a, b, statistics.median(values), len(values)))
    print("| from | to | n | median ms | mean ms |\n| --- | --- | ---: | ---: | ---: |")
    for mean, a, b, median, n in sorted(rows, key=lambda r: (r[1].startswith("main"), -r[0])):
        print(f"| {a} | {b} | {n} | {1000 * median:.2f} | {1000 * mean:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["A", "B"])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--async", dest="async_slots", type=int, default=0, help="rqworker --async N, async def jobs")
    parser.add_argument("--html", default=None, help="also write pyinstrument's HTML here")
    parser.add_argument("--show-all", action="store_true")
    parser.add_argument("--cycle", action="store_true", help="time a job slot's cycle instead of profiling")
    parser.add_argument("--steps", action="store_true", help="CPU time of each per-job step instead of profiling")
    parser.add_argument("--nap", type=float, default=None, help="with --async: coroutine jobs that wait NAP seconds")
    opts = parser.parse_args()
    from devtools.redis_server import RedisServer

    tmp = tempfile.mkdtemp(prefix="optima-prof-")
    httpd = None
    with RedisServer() as server:
        http_url = None
        if opts.workload == "B":
            httpd = subprocess.Popen(
                [sys.executable, str(ROOT / "bench" / "peer_jobs" / "httpd.py")], stdout=subprocess.PIPE, text=True
            )
            http_url = f"http://127.0.0.1:{int(httpd.stdout.readline().split()[-1])}/wait"
        try:
            setup(opts.workload, tmp, server.url, http_url)
            enqueue(opts.jobs, opts.workload, coroutines=bool(opts.async_slots), nap=opts.nap)
            from django.core.management import call_command
            from pyinstrument import Profiler
            from pyinstrument.session import Session

            sessions = []
            args = ["rqworker", "default", "--burst", "-v", "0", "--without-scheduler"]
            if opts.async_slots:
                args += ["--async", str(opts.async_slots)]
            elif opts.concurrency > 1:
                args += ["--concurrency", str(opts.concurrency)]
            else:
                args += ["--no-fork"]
            if opts.steps:
                totals = timed_steps()
                started, main_started, process_started = time.perf_counter(), time.thread_time(), time.process_time()
                call_command(*args)
                main_cpu, process_cpu = time.thread_time() - main_started, time.process_time() - process_started
                elapsed = time.perf_counter() - started
                print(f"{opts.jobs} jobs in {elapsed:.1f} s: {opts.jobs / elapsed:.0f} jobs/s (start-up included)")
                steps_table(totals, opts.jobs, main_cpu, process_cpu)
                return
            if opts.cycle:
                events = timed_cycle()
                started = time.perf_counter()
                call_command(*args)
                elapsed = time.perf_counter() - started
                print(f"{opts.jobs} jobs in {elapsed:.1f} s: {opts.jobs / elapsed:.0f} jobs/s (start-up included)")
                cycle_table(events)
                return
            if opts.async_slots or opts.concurrency > 1:
                profiled_threads(sessions)  # the job threads (an async job's coroutine runs on the loop's, unprofiled)
            profiler = Profiler(interval=0.0005)
            started = time.perf_counter()
            profiler.start()
            call_command(*args)
            main_session = profiler.stop()
            elapsed = time.perf_counter() - started
            done = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.endswith(".bin")) // 24
            print(f"{done} jobs in {elapsed:.1f} s under the profiler: {done / elapsed:.0f} jobs/s")
            from pyinstrument.renderers import ConsoleRenderer

            renderer = ConsoleRenderer(unicode=True, color=False, show_all=opts.show_all, short_mode=False)
            print("== main thread ==")
            print(renderer.render(main_session))
            if sessions:
                merged = sessions[0]
                for session in sessions[1:]:
                    merged = Session.combine(merged, session)
                print(f"== the job threads, {len(sessions)} runs merged ==")
                print(renderer.render(merged))
            if opts.html:
                Path(opts.html).write_text(profiler.output_html())
        finally:
            if httpd is not None:
                httpd.terminate()
                httpd.wait()


if __name__ == "__main__":
    main()
