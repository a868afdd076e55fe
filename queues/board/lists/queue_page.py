"""The queue page (``queues/queue.html``): counts per state, the bands, the ends of the queue, workers, held
jobs and the PID of rq's scheduler holding the queue's lock. Four round trips.
"""

import redis
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django_rq.settings import get_queues_list
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues.board.access import panel_context
from queues.board.lists.reads import (
    BANDS,
    count_calls,
    counts_from,
    pipelined,
    raw_pipeline,
    tabs_of,
)
from queues.board.readonly import get_queue_by_index, wrong_type
from queues.jobs import capped
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.producer import limits


def _text_or_none(key, value, what):
    """A reply as text; bytes that are not UTF-8 read as none (reported)."""
    if value is None:
        return None
    try:
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError:
        entries.report(key, f"{what} is not UTF-8: shown as none")
        return None


def _held(connection, name):
    """Jobs of queue ``name`` held back by their limit key (two round trips); a set rq's limits cannot read
    counts none (reported)."""
    try:
        return sum(use.held for use in limits.keys_in_use(connection, [name]).get(name, []))
    except (redis.ResponseError, UnicodeDecodeError) as exc:
        if isinstance(exc, redis.ResponseError) and "WRONGTYPE" not in str(exc):
            raise
        entries.report(keys.limit_keys_key(), f"cannot be read ({type(exc).__name__}): no held jobs shown")
        return 0


def _connection_shown(queue):
    """Host, port, db, username, and a Sentinel's service and sentinels: never a password."""
    pool = queue.connection.connection_pool
    kwargs = pool.connection_kwargs
    shown = {name: kwargs.get(name) for name in ("host", "port", "db", "username", "path")}
    manager = getattr(pool, "sentinel_manager", None)
    if manager is not None:
        shown["service_name"] = getattr(pool, "service_name", None)
        shown["sentinels"] = [
            (s.connection_pool.connection_kwargs.get("host"), s.connection_pool.connection_kwargs.get("port"))
            for s in manager.sentinels
        ]
        if shown["sentinels"]:
            shown["host"], shown["port"] = shown["sentinels"][0]
    return shown


@never_cache
def queue_details(request, queue_index):
    """The queue page: counts per state, the bands, the oldest and newest queued jobs, workers, held jobs and
    the PID of rq's scheduler holding the queue's lock. Four round trips."""
    queue = get_queue_by_index(queue_index)
    connection = queue.connection
    lock_key = RQScheduler.get_locking_key(queue.name)
    workers_key = WORKERS_BY_QUEUE_KEY % queue.name
    calls = count_calls(queue)
    calls += [(key, "lindex", (0,), None) for key in queue.band_keys]
    calls += [(key, "lindex", (-1,), None) for key in queue.band_keys]
    calls += [(workers_key, "smembers", (), set()), (lock_key, "get", (), None)]
    replies = pipelined(connection, calls)  # 1
    counts = counts_from(queue, replies)
    n = len(count_calls(queue))
    heads, tails = replies[n : n + 3], replies[n + 3 : n + 6]
    members, lock = replies[n + 6], replies[n + 7]
    num_workers = len([m for m in members if _text_or_none(workers_key, m, "a member") is not None])
    oldest_id = next((h for h in heads if h is not None), None)
    newest_id = next((t for t in reversed(tails) if t is not None), None)
    scheduler = _text_or_none(lock_key, lock, "the lock's holder")
    ends = [i for i in (oldest_id, newest_id) if i is not None]
    calls = [(jobread.job_key(jobread.normal_id(i)), capped.read_key, (), None) for i in ends]
    if scheduler is not None:
        calls.append((SCHEDULER_KEY_TEMPLATE % scheduler, "hget", ("pid",), None))
    # 2: the ends and the PID (a job hash of the wrong type comes back as an error: jobread says corrupt).
    replies = raw_pipeline(connection, calls)
    jobs = [jobread.load(jobread.normal_id(i), r, connection) for i, r in zip(ends, replies)]
    oldest = jobs[0] if ends and oldest_id is not None else None
    newest = jobs[-1] if ends and newest_id is not None else None
    scheduler_pid = _pid(lock_key, replies[len(ends)]) if scheduler is not None else None
    context = {
        **panel_context(request),
        "title": f"Queue {queue.name}",
        "queue": queue,
        "queue_index": queue_index,
        "tabs": tabs_of(queue_index, counts),
        "counts": counts,
        "bands": list(zip(BANDS, counts["bands"])),
        "connection_kwargs": _connection_shown(queue),
        "queue_config": get_queues_list()[queue_index]["connection_config"],
        "num_workers": num_workers,
        "held_jobs": _held(connection, queue.name),  # 3, 4
        "scheduler_pid": scheduler_pid,
        "oldest_queued_job": oldest,
        "newest_queued_job": newest,
    }
    return render(request, "queues/queue.html", context)


def _pid(lock_key, reply):
    if isinstance(reply, redis.ResponseError):
        return wrong_type(f"the scheduler lock of {lock_key}", reply, None)
    try:
        return int(reply) if reply else None
    except (ValueError, UnicodeDecodeError):
        entries.report(lock_key, "its scheduler's PID is not a number: no PID shown")
        return None
