"""Where a search reads its candidates: one source, the most selective the criteria allow (the table
in ``find.py``), and one page of ids from it with the key each came from, newest first.

``Source.claims`` says what every job read from a key must have (its owner, function or queue):
``find.py`` checks each job against it (``verify.py``) before showing it.
"""

import heapq
import itertools
from dataclasses import dataclass, field

import redis
from rq.registry import CanceledJobRegistry, DeferredJobRegistry

from queues.catalog.lookup import queue_names
from queues.keyspace import entries, keys


@dataclass
class Source:
    label: str
    key: str | None = None  # a sorted set read newest first
    merged: tuple = ()  # or several, merged by score
    lists: tuple = ()  # or lists read in order (a queue's bands)
    started: bool = False  # members "<job id>:<execution id>" (rq's started registry)
    index: bool = False  # an index of ours: gone and misplaced jobs are removed from it
    covers: tuple = ()  # criteria the source itself answers (once each job is checked against it)
    claims: dict = field(default_factory=dict)  # key read -> (criterion, value) every job in it must have


def source_for(function, queue, state, owner):
    if owner is not None:
        key = keys.search_owner_key(owner)
        return Source(f"jobs of owner {owner}", key, index=True, covers=("owner",), claims={key: ("owner", owner)})
    if function:
        key = keys.search_func_key(function)
        claims = {key: ("function", function)}
        return Source(f"jobs of {function}", key, index=True, covers=("function",), claims=claims)
    if queue and state and state not in ("stopped", "held"):
        covers = ("queue", "state")
        if state == "queued":
            bands = tuple(keys.band_keys(keys.queue_key(queue)))
            claims = dict.fromkeys(bands, ("queue", queue))
            return Source(f"queued jobs of {queue}", lists=bands, covers=covers, claims=claims)
        key = {
            "scheduled": keys.scheduled_key,
            "started": keys.started_key,
            "finished": keys.finished_key,
            "failed": keys.failed_key,
            "deferred": DeferredJobRegistry.key_template.format,
            "canceled": CanceledJobRegistry.key_template.format,
        }[state](queue)
        claims = {key: ("queue", queue)}
        return Source(f"{state} jobs of {queue}", key, started=state == "started", covers=covers, claims=claims)
    if queue:
        key = keys.search_queue_key(queue)
        return Source(f"jobs of queue {queue}", key, index=True, covers=("queue",), claims={key: ("queue", queue)})
    merged = {keys.search_queue_key(n): ("queue", n) for n in queue_names()}
    return Source("jobs of every queue", merged=tuple(merged), index=True, claims=merged)


def _wrong_type(reply):
    """True for a WRONGTYPE reply; another error (a bug, a refused command) is raised, never read as corruption."""
    if not isinstance(reply, Exception):
        return False
    if isinstance(reply, redis.ResponseError) and str(reply).startswith("WRONGTYPE"):
        return True
    raise reply


def total_and_ids(connection, source, start, count):
    """(candidates in the source, [(id, key it was read from, member as stored)] from ``start``, at most
    ``count``): one or two round trips. (An id that is not UTF-8 is read as text, removed as stored.)"""
    if source.merged:
        with connection.pipeline(transaction=False) as pipe:
            for key in source.merged:
                pipe.zcard(key)
            for key in source.merged:
                pipe.zrevrange(key, 0, start + count - 1, withscores=True)
            replies = pipe.execute(raise_on_error=False)
        totals, lists = replies[: len(source.merged)], replies[len(source.merged) :]
        read = []
        for key, total, reply in zip(source.merged, totals, lists):
            if _wrong_type(total) or _wrong_type(reply):
                entries.report(key, "is not a sorted set: searched as empty")
                continue
            read.append([(member, score, key) for member, score in reply])
        newest = heapq.merge(*read, key=lambda entry: -entry[1])
        return (
            sum(t for t in totals if isinstance(t, int)),
            [(_text(member), key, member) for member, _score, key in itertools.islice(newest, start, start + count)],
        )
    if source.key is not None:
        with connection.pipeline(transaction=False) as pipe:
            pipe.zcard(source.key)
            pipe.zrevrange(source.key, start, start + count - 1)
            total, ids = pipe.execute(raise_on_error=False)
        if _wrong_type(total) or _wrong_type(ids):
            entries.report(source.key, "is not a sorted set: searched as empty")
            return 0, []
        if source.started:
            seen = dict.fromkeys(_text(m).rsplit(":", 1)[0] for m in ids)
            return total, [(job_id, source.key, job_id) for job_id in seen]
        return total, [(_text(m), source.key, m) for m in ids]
    with connection.pipeline(transaction=False) as pipe:
        for key in source.lists:
            pipe.llen(key)
        lengths = [n if isinstance(n, int) else 0 for n in pipe.execute(raise_on_error=False)]
    ids, offset = [], start
    with connection.pipeline(transaction=False) as pipe:
        wanted = []
        for key, length in zip(source.lists, lengths):
            if offset < length and len(wanted) < count:
                take = min(count - len(wanted), length - offset)
                pipe.lrange(key, offset, offset + take - 1)
                wanted.append(key)
            offset = max(0, offset - length)
        for key, reply in zip(wanted, pipe.execute(raise_on_error=False) if wanted else []):
            if not isinstance(reply, Exception):
                ids.extend((_text(m), key, m) for m in reply)
    return sum(lengths), ids


def _text(value):
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
