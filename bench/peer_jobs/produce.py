"""The producer of one system: enqueues jobs of workload A or C (no-op) or B or B-async (I/O), each with ``time.time()``
at its enqueue as its only argument, on request: a line ``COUNT EVERY`` on stdin sends COUNT jobs, as fast
as it can (EVERY 0) or one every EVERY seconds, then answers ``{"seconds": ...}`` on stdout.

    python -m bench.peer_jobs.produce ours|ours-async|rq|celery|dramatiq|arq|taskiq A|B|B-async|C

ours: ``queues.enqueue`` (declared, signed; Django set up from the environment), on queue
``default``; ours-async: the same with the ``async def`` jobs (``rqworker --async``); rq:
``rq.Queue.enqueue`` (JSON) of the same functions; the peers through their own client API. Redis is
``$BENCH_REDIS_URL``. Prints ``{"seconds": ...}`` when done. Workload C's jobs are A's (its worker's Redis
is further away, not its producer's), B-async's are B's (arq's, taskiq's and ours-async's are ``async def``).
"""

import argparse
import asyncio
import json
import os
import sys
import time


def pace(count, every):
    """Yields ``count`` times, ``every`` seconds apart (on a fixed schedule: no drift)."""
    start = time.monotonic()
    for n in range(count):
        if every:
            wait = start + n * every - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        yield n


def job_name(workload):
    return "noop" if workload in ("A", "C") else "io"


def sender(system, workload):
    """-> send(enqueued_at) for this system and workload."""
    name = job_name(workload)
    url = os.environ["BENCH_REDIS_URL"]
    if system in ("ours", "ours-async"):
        import django

        django.setup()
        import queues

        func = f"bench.peer_jobs.ours.{name}{'_async' if system == 'ours-async' else ''}"
        return lambda t: queues.enqueue("default", func, t)
    if system == "rq":
        from redis import Redis
        from rq import Queue
        from rq.serializers import JSONSerializer

        from bench.peer_jobs import ours

        queue = Queue("default", connection=Redis.from_url(url), serializer=JSONSerializer)
        func = getattr(ours, name)
        return lambda t: queue.enqueue(func, t)
    if system == "celery":
        from bench.peer_jobs import celery_app

        task = getattr(celery_app, name)
        return lambda t: task.delay(t)
    if system == "dramatiq":
        from bench.peer_jobs import dramatiq_jobs

        actor = getattr(dramatiq_jobs, name)
        return lambda t: actor.send(t)
    raise SystemExit(f"unknown system {system!r}")


async def arq_produce(workload, requests):
    from arq import create_pool
    from arq.connections import RedisSettings

    pool = await create_pool(RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"]))
    name = job_name(workload)
    for count, every in requests:
        started, start = time.perf_counter(), time.monotonic()
        for n in range(count):
            if every:
                wait = start + n * every - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            await pool.enqueue_job(name, time.time())
        answer(started)
    await pool.aclose()


async def taskiq_produce(workload, requests):
    from bench.peer_jobs import taskiq_jobs

    broker = taskiq_jobs.broker
    await broker.startup()  # creates the stream's consumer group (from "$": before the jobs, so they are read)
    task = getattr(taskiq_jobs, job_name(workload))
    for count, every in requests:
        started, start = time.perf_counter(), time.monotonic()
        for n in range(count):
            if every:
                wait = start + n * every - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            await task.kiq(time.time())
        answer(started)
    await broker.shutdown()


def answer(started):
    print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


def requests():
    for line in sys.stdin:
        count, every = line.split()
        yield int(count), float(every)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system")
    parser.add_argument("workload", choices=["A", "B", "B-async", "C"])
    opts = parser.parse_args()
    if opts.system == "arq":
        asyncio.run(arq_produce(opts.workload, requests()))
        return
    if opts.system == "taskiq":
        asyncio.run(taskiq_produce(opts.workload, requests()))
        return
    send = sender(opts.system, opts.workload)
    for count, every in requests():
        started = time.perf_counter()
        for _ in pace(count, every):
            send(time.time())
        answer(started)


if __name__ == "__main__":
    main()
