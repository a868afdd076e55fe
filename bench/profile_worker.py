"""pyinstrument's call tree of this project's worker draining peers.py's jobs, in-process (issue 21).

    .venv/bin/python bench/profile_worker.py A --jobs 3000              # rqworker --no-fork, no-op jobs
    .venv/bin/python bench/profile_worker.py B --jobs 1000 --concurrency 32   # 100 ms HTTP jobs, 32 at once
    .venv/bin/python bench/profile_worker.py A --jobs 3000 --concurrency 32 --html /tmp/a.html

One private redis-server and (for B) peers.py's HTTP server; the jobs (``bench.peer_jobs.ours``)
enqueued with ``queues.enqueue_many`` before the worker starts; then ``manage.py rqworker --burst``
runs in this process under pyinstrument. With ``--concurrency`` > 1 every job's thread is profiled
too, and the threads' trees are shown merged (the main thread's first). Prints the jobs/s of the
profiled run (pyinstrument slows it down: read the shares, not the rate).
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
    os.environ.update(REDIS_URL=redis_url, QUEUE_PREFIX=f"prof-{uuid.uuid4().hex[:6]}", LOG_LEVEL="WARNING",
                      DJANGO_SETTINGS_MODULE="optima_site.settings", OPTIMA_ENV="test",
                      DATABASE_URL=f"sqlite:///{tmp}/db.sqlite3", QUEUE_JOB_MODULES="bench.peer_jobs.ours",
                      BENCH_RECORD_DIR=tmp, BENCH_HTTP_URL=http_url or "http://127.0.0.1:1/wait")
    os.environ["RQ_KEY_PREFIX"] = os.environ["QUEUE_PREFIX"]
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def enqueue(jobs, workload):
    import queues
    from bench.peer_jobs import ours

    func = ours.noop if workload == "A" else ours.io
    for start in range(0, jobs, 500):
        queues.enqueue_many("default", func, [(time.time(),) for _ in range(min(500, jobs - start))])


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["A", "B"])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--html", default=None, help="also write pyinstrument's HTML here")
    parser.add_argument("--show-all", action="store_true")
    opts = parser.parse_args()
    from devtools.redis_server import RedisServer

    tmp = tempfile.mkdtemp(prefix="optima-prof-")
    httpd = None
    with RedisServer() as server:
        http_url = None
        if opts.workload == "B":
            httpd = subprocess.Popen([sys.executable, str(ROOT / "bench" / "peer_jobs" / "httpd.py")],
                                     stdout=subprocess.PIPE, text=True)
            http_url = f"http://127.0.0.1:{int(httpd.stdout.readline().split()[-1])}/wait"
        try:
            setup(opts.workload, tmp, server.url, http_url)
            enqueue(opts.jobs, opts.workload)
            from django.core.management import call_command
            from pyinstrument import Profiler
            from pyinstrument.session import Session

            sessions = []
            args = ["rqworker", "default", "--burst", "-v", "0", "--without-scheduler"]
            if opts.concurrency > 1:
                profiled_threads(sessions)
                args += ["--concurrency", str(opts.concurrency)]
            else:
                args += ["--no-fork"]
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
