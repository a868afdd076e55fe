"""The search index: what Redis cannot read in a job's zlib-compressed ``data``, kept beside it.

A job's hash holds its function and arguments compressed (rq's ``data``), so Redis cannot select
jobs by function or owner. Every enqueue therefore adds the job's id, scored by its enqueue time
(seconds since the epoch), to sorted sets under ``<p>:optima:search:`` (queues/keyspace/keys.py):

=====================  ============================================================
key                    members
=====================  ============================================================
``search:queue:<q>``   the jobs enqueued to queue ``<q>``
``search:func:<f>``    the jobs of function ``<f>`` (its dotted path)
``search:owner:<o>``   the jobs whose ``meta["owner"]`` is ``<o>`` (jobs enqueued through the API)
``search:functions``   function -> its latest enqueue time (the panel lists them)
``search:owners``      owner -> its latest enqueue time (the trim walks them)
=====================  ============================================================

Written by ``add_into`` inside the enqueue's MULTI (``queues/producer/write.py``): no extra round
trip; a retry, a requeue or the scheduler's move keeps the job's entries (its id does not change).

"Expires with the job", three ways:

1. lazily: a search that meets an id whose job hash is gone removes it from the set it read
   (``find.py``);
2. by the trim (``trim``, run by workers with rq's maintenance, every ``maintenance_interval``):
   ZREMRANGEBYSCORE of the members older than ``retention_seconds()`` — the longest ``result_ttl``
   or ``failure_ttl`` of the declared queues, at most ``MAX_SECONDS`` (a dead job kept forever, the
   default ``failure_ttl=-1``, stays findable by id, and in the dead-letter admin, after it leaves
   the index);
3. every index key gets an expiry of ``retention_seconds()``, refreshed by the enqueues that write
   to it — by each process at most once every ``REFRESH_SECONDS`` per key (an EXPIRE per key and
   enqueue cost a single enqueue a third more time, bench/README.md): a function or owner not seen
   for that long leaves no key behind;
4. with its job: the completed jobs retention removes beyond a queue's ``completed_max``
   (queues/jobs/retention.py ``TRIM_LUA``) leave their queue's, function's and owner's sets in the
   same call, so the index of a busy queue holds about as many completed jobs as retention keeps,
   not a day's worth.

What an enqueue adds to its MULTI, then: one ZADD per key it touches (its queue, its function, its
owner), and about once a minute per key an EXPIRE and the ZADD of the function (owner) list.

A job waiting longer than ``retention_seconds()`` (a delay of weeks) leaves the index too; the
panel's queue-and-state search reads rq's registries themselves, so it still lists it there.
"""

import time

from queues.jobs import meta as jobmeta
from queues.keyspace import keys

MAX_SECONDS = 7 * 24 * 3600  # the index never keeps an entry longer than this
TRIM_KEYS = 1000  # function and owner keys trimmed per run at most (the most recently used ones)
REFRESH_SECONDS = 60  # a process refreshes a key's expiry (and the function/owner lists) this often at most
_refreshed: dict[str, float] = {}  # key -> time.monotonic() of this process's latest EXPIRE of it
_retention = (None, MAX_SECONDS)  # (declared dict it was computed from, seconds)


def retention_seconds():
    """Seconds an index entry is kept: the longest ``result_ttl``/``failure_ttl`` of the declared
    queues (-1, forever, counts as ``MAX_SECONDS``), at most ``MAX_SECONDS``, at least an hour."""
    global _retention
    from queues.catalog.queues import declared  # no cycle: to the top once issue 32's edits here are merged

    configs = declared()
    if _retention[0] is not configs:
        longest = 3600
        for config in configs.values():
            for name in ("result_ttl", "failure_ttl"):
                value = config.options.get(name)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    longest = max(longest, MAX_SECONDS if value < 0 else value)
        _retention = (configs, int(min(longest, MAX_SECONDS)))
    return _retention[1]


def add_into(pipe, queue_name, jobs, stamp=None):
    """Queue on ``pipe`` (the enqueue's MULTI) the index entries of ``jobs``, enqueued to ``queue_name``
    at ``stamp`` (seconds; now by default). Jobs of one batch get scores a microsecond apart, in
    order, so that newest-first lists them in a stable order. On every enqueue's path: kept lean
    (plain ZADDs, the expiry refreshes throttled)."""
    if not jobs:
        return
    stamp = time.time() if stamp is None else stamp
    queue_key = keys.search_queue_key(queue_name)
    lists = {}  # index key -> (list key, member) of the function and owner sets
    if len(jobs) == 1:  # a single enqueue: no dicts of members
        job = jobs[0]
        func_key = keys.search_func_key(job.func_name)
        pipe.execute_command("ZADD", queue_key, stamp, job.id)
        pipe.execute_command("ZADD", func_key, stamp, job.id)
        lists[func_key] = (keys.search_functions_key(), job.func_name)
        owner = jobmeta.owner(job.meta)
        if owner is not None:
            owner_key = keys.search_owner_key(owner)
            pipe.execute_command("ZADD", owner_key, stamp, job.id)
            lists[owner_key] = (keys.search_owners_key(), str(owner))
    else:
        written = {queue_key: {}}
        for i, job in enumerate(jobs):
            score = stamp + i * 1e-6
            written[queue_key][job.id] = score
            func_key = keys.search_func_key(job.func_name)
            written.setdefault(func_key, {})[job.id] = score
            lists[func_key] = (keys.search_functions_key(), job.func_name)
            owner = jobmeta.owner(job.meta)
            if owner is not None:
                owner_key = keys.search_owner_key(owner)
                written.setdefault(owner_key, {})[job.id] = score
                lists[owner_key] = (keys.search_owners_key(), str(owner))
        for key, members in written.items():
            pipe.zadd(key, members)
    moment = time.monotonic()
    for key in (queue_key, *lists):
        if moment - _refreshed.get(key, -REFRESH_SECONDS) < REFRESH_SECONDS:
            continue
        if len(_refreshed) > 10_000:
            _refreshed.clear()
        _refreshed[key] = moment
        ttl = retention_seconds()
        pipe.expire(key, ttl)
        if key in lists:
            list_key, member = lists[key]
            pipe.zadd(list_key, {member: stamp})
            pipe.expire(list_key, ttl)


def written_keys(queue_name, jobs):
    """{key: Redis type} of what ``add_into`` writes (``queues.keyspace.quarantine``)."""
    found = {keys.search_queue_key(queue_name): "zset", keys.search_functions_key(): "zset"}
    for job in jobs:
        found[keys.search_func_key(job.func_name)] = "zset"
        owner = jobmeta.owner(job.meta)
        if owner is not None:
            found[keys.search_owner_key(owner)] = "zset"
            found[keys.search_owners_key()] = "zset"
    return found


def trim(connection, queue_names, now=None):
    """Drop the index entries older than ``retention_seconds()``: in every queue's set
    and the ``TRIM_KEYS`` most recently used functions' and owners' sets. Two round trips; returns
    the number of entries removed. A key of another type is skipped (its reply is an error)."""
    now = time.time() if now is None else now
    oldest = now - retention_seconds()
    with connection.pipeline(transaction=False) as pipe:
        pipe.zrevrange(keys.search_functions_key(), 0, TRIM_KEYS - 1)
        pipe.zrevrange(keys.search_owners_key(), 0, TRIM_KEYS - 1)
        functions, owners = pipe.execute(raise_on_error=False)
    functions = functions if isinstance(functions, list) else []
    owners = owners if isinstance(owners, list) else []
    targets = [keys.search_functions_key(), keys.search_owners_key()]
    targets += [keys.search_queue_key(name) for name in queue_names]
    targets += [keys.search_func_key(_text(f)) for f in functions]
    targets += [keys.search_owner_key(_text(o)) for o in owners]
    with connection.pipeline(transaction=False) as pipe:
        for key in targets:
            pipe.zremrangebyscore(key, "-inf", f"({oldest}")
        replies = pipe.execute(raise_on_error=False)
    return sum(r for r in replies if isinstance(r, int))


def _text(value):
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
