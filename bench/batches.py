"""The cost of a batch (issue 34): enqueueing its members, and Redis memory over many members.

    .venv/bin/python bench/batches.py                          # ~3 minutes on the 2-core box
    .venv/bin/python bench/batches.py --members 10000 --rounds 7 --batches 1000 --per-batch 100

One private redis-server (devtools/redis_server.py) and one Django process (this file with ``_child``):

- enqueue: interleaved rounds of ``queues.enqueue_many("default", "bench.jobs.noop", [()] * N)`` (N =
  ``--members``, 10,000: one call, one MULTI) against the same call inside ``with queues.batch(on_complete=
  queues.call(...)):`` (the batch's open: its hash and its callback's signed job, one MULTI; the members'
  meta carries the batch id; the close: the ids added to the batch's members, one MULTI). The median of the
  per-round ratios; the issue's target is <= 1.5x.
- memory: two ``rqworker --no-fork`` run ``--batches`` batches of ``--per-batch`` no-op members (100,000 in
  1,000 batches), fed while they run (at most ``--ahead`` batches not yet succeeded); Redis ``used_memory``
  is sampled after every tenth of the batches. A succeeded batch freezes its counts in its hash and drops
  its sets (queues/workflows/scripts.py); the jobs' retention trims their hashes: it should stay flat.

Printed: a Markdown table of each, for bench/README.md.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

JOB = "bench.jobs.noop"
CALLBACK = ("default", "tests.jobs.batches.callback", os.devnull, "complete")


def enqueue_rounds(rounds, members):
    import queues
    from queues.connection.clients import get_connection

    client = get_connection()
    calls = [()] * members

    def plain():
        queues.enqueue_many("default", JOB, calls)

    def batched():
        with queues.batch(on_complete=queues.call(*CALLBACK)):
            queues.enqueue_many("default", JOB, calls)

    plain(), batched()  # warm up
    client.flushdb()
    ratios, times = [], {"enqueue_many": [], "batch + enqueue_many": []}
    for r in range(rounds):
        took = {}
        for name, func in sorted({"enqueue_many": plain, "batch + enqueue_many": batched}.items(), reverse=r % 2 == 1):
            started = time.perf_counter()
            func()
            took[name] = time.perf_counter() - started
            client.flushdb()
            times[name].append(took[name])
        ratios.append(took["batch + enqueue_many"] / took["enqueue_many"])
    return {"ratio": statistics.median(ratios), "times": {k: statistics.median(v) for k, v in times.items()}}


def memory_run(batches, per_batch, ahead):
    import queues
    from queues.connection.clients import get_connection

    client = get_connection()
    client.flushdb()
    base = client.info("memory")["used_memory"]
    open_ids, done, samples = [], 0, [(0, 0, base)]
    started = time.monotonic()
    submitted = 0
    while done < batches:
        while submitted < batches and len(open_ids) < ahead:
            with queues.batch(on_complete=queues.call(*CALLBACK)) as b:
                queues.enqueue_many("default", JOB, [()] * per_batch)
            open_ids.append(b.id)
            submitted += 1
        still = []
        for batch_id in open_ids:
            state = queues.batch_state(batch_id)
            if state is not None and state.state == "succeeded":
                done += 1
                if done % max(1, batches // 10) == 0:
                    samples.append((round(time.monotonic() - started, 1), done, client.info("memory")["used_memory"]))
            else:
                still.append(batch_id)
        open_ids = still
        if open_ids and len(open_ids) >= ahead:
            time.sleep(0.05)  # the bench's own poll: wait for the workers
    return {"samples": samples}


def child(opts):
    import django

    django.setup()
    out = {"enqueue": enqueue_rounds(opts.rounds, opts.members)}
    if opts.batches:
        out["memory"] = memory_run(opts.batches, opts.per_batch, opts.ahead)
    print(json.dumps(out))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--members", type=int, default=10_000, help="members of the enqueue comparison")
    parser.add_argument("--batches", type=int, default=1000, help="batches of the memory run (0: skip it)")
    parser.add_argument("--per-batch", type=int, default=100)
    parser.add_argument("--ahead", type=int, default=4, help="batches not yet succeeded at most")
    parser.add_argument("_child", nargs="?")
    opts = parser.parse_args()
    if opts._child == "_child":
        return child(opts)

    from devtools.redis_server import RedisServer

    workdir = tempfile.mkdtemp(prefix="optima-bench-batches-")
    with RedisServer() as server:
        env = {k: v for k, v in os.environ.items() if k not in ("QUEUE_ACCEPT_UNSIGNED_UNTIL",)}
        env.update(
            REDIS_URL=server.url,
            DATABASE_URL=f"sqlite:///{workdir}/db.sqlite3",
            OPTIMA_ENV="test",
            QUEUE_PREFIX="bench",
            QUEUE_JOB_MODULES="bench.jobs,tests.jobs",
            DJANGO_SETTINGS_MODULE="optima_site.settings",
        )
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], check=True, env=env, cwd=ROOT)
        workers = []
        if opts.batches:
            workers = [
                subprocess.Popen(
                    [sys.executable, "manage.py", "rqworker", "default", "--no-fork"],
                    env=env,
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(2)
            ]
        try:
            argv = [sys.executable, __file__, "_child", "--rounds", str(opts.rounds), "--members", str(opts.members)]
            argv += ["--batches", str(opts.batches), "--per-batch", str(opts.per_batch), "--ahead", str(opts.ahead)]
            out = subprocess.run(argv, check=True, env=env, cwd=ROOT, capture_output=True, text=True).stdout
        finally:
            for worker in workers:
                worker.terminate()
            for worker in workers:
                worker.wait(60)
    data = json.loads(out.strip().splitlines()[-1])
    enqueue = data["enqueue"]
    print(f"enqueue of {opts.members:,} members, median of {opts.rounds} rounds\n")
    print("| way | time | vs enqueue_many |")
    print("| --- | ---: | ---: |")
    print(f"| `queues.enqueue_many` | {enqueue['times']['enqueue_many']:.3f} s | 1.00x |")
    print(
        f"| the same inside `queues.batch(on_complete=...)` | {enqueue['times']['batch + enqueue_many']:.3f} s "
        f"| {enqueue['ratio']:.2f}x |"
    )
    if "memory" in data:
        print(f"\nRedis used_memory over {opts.batches:,} batches of {opts.per_batch} members\n")
        print("| seconds | batches succeeded | members run | used_memory |")
        print("| ---: | ---: | ---: | ---: |")
        for seconds, done, used in data["memory"]["samples"]:
            print(f"| {seconds} | {done:,} | {done * opts.per_batch:,} | {used / 2**20:.1f} MiB |")


if __name__ == "__main__":
    main()
