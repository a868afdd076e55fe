"""The producer of one system: enqueues COUNT jobs of workload A (no-op) or B (I/O), as fast as it can
or one every ``--every`` seconds, each with ``time.time()`` at its enqueue as its argument.

    python -m bench.peer_jobs.produce ours|rq|celery|dramatiq|arq A|B COUNT [--every 0.02]

ours: ``queues.enqueue`` (declared, signed; Django set up from the environment), on queue
``default``; rq: ``rq.Queue.enqueue`` (JSON) of the same functions; the peers through their own
client API. Redis is ``$BENCH_REDIS_URL``. Prints ``{"seconds": ...}`` when done.
"""
import argparse
import asyncio
import json
import os
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


def sender(system, workload):
    """-> send(enqueued_at) for this system and workload."""
    name = "noop" if workload == "A" else "io"
    url = os.environ["BENCH_REDIS_URL"]
    if system == "ours":
        import django

        django.setup()
        import queues

        func = f"bench.peer_jobs.ours.{name}"
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


async def arq_produce(workload, count, every):
    from arq import create_pool
    from arq.connections import RedisSettings

    pool = await create_pool(RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"]))
    name = "noop" if workload == "A" else "io"
    start = time.monotonic()
    for n in range(count):
        if every:
            wait = start + n * every - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        await pool.enqueue_job(name, time.time())
    await pool.aclose()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system")
    parser.add_argument("workload", choices=["A", "B"])
    parser.add_argument("count", type=int)
    parser.add_argument("--every", type=float, default=0.0, help="seconds between two jobs (0: as fast as it can)")
    opts = parser.parse_args()
    started = time.perf_counter()
    if opts.system == "arq":
        asyncio.run(arq_produce(opts.workload, opts.count, opts.every))
    else:
        send = sender(opts.system, opts.workload)
        for _ in pace(opts.count, opts.every):
            send(time.time())
    print(json.dumps({"seconds": time.perf_counter() - started}), flush=True)


if __name__ == "__main__":
    main()
