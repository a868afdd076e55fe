"""``search_jobs``: live jobs by function, owner, queue, state and text, newest first, a page at a time.

One source is read, the most selective the search allows, then the other criteria are checked on
the jobs themselves (one pipelined HMGET per ``CHUNK`` candidates):

=================================  =====================================================  ===========
criteria given                     source (newest first)                                  order
=================================  =====================================================  ===========
``owner``                          ``search:owner:<o>`` (queues/search/index.py)          enqueue time
``function``                       ``search:func:<f>``                                    enqueue time
``queue`` and ``state``            rq's own list or registry of that queue and state      rq's
                                   (not for held and stopped jobs, which have none)
``queue``                          ``search:queue:<q>``                                   enqueue time
none of those                      every queue's ``search:queue:<q>``, merged             enqueue time
=================================  =====================================================  ===========

With nothing left to check on the jobs (e.g. only a queue, or only a function) a page reads just
its own ids: exact, whatever the source's size. Otherwise (a ``text``, or a second criterion) the
search scans at most ``scan_limit`` candidates (``SCAN_LIMIT``) from ``start`` and says how far it
got (``Found.scanned`` of ``Found.total``; ``next_start`` continues the scan): a search never reads
100,000 jobs in one request. (Merged, each queue's set is read up to ``start`` plus the window: a
page deep into an every-queue search reads more than one near its start.)

``text`` matches, case-insensitively, the job id, its description, or its arguments: the job's
``data`` is zlib-compressed JSON (rq's JSONSerializer, the only one this project uses), inflated
at most to ``entries.JOB_BYTES`` and parsed with ``json`` — nothing is ever unpickled.

A candidate whose job hash is gone (expired, deleted) is removed from the index it was read from
(the lazy half of "the index expires with the job": queues/search/index.py). A candidate whose job
does not match the set it was read from (its own ``meta["owner"]``, function, queue: a planted
entry) is never shown nor its text matched, and is removed too (``verify.py``); the next page then
starts that many entries earlier, so none is skipped. ``start`` is at most ``MAX_START``: a larger
one is refused (``InvalidSearch``), and only a WRONGTYPE reply reports an index key as corrupt.
"""

import json
import zlib
from dataclasses import dataclass, field

import redis

from queues.catalog.lookup import get_config
from queues.connection.clients import get_connection, unavailable
from queues.exceptions import QueuesError
from queues.keyspace import entries, keys
from queues.search import sources, verify

STATES = ("queued", "scheduled", "held", "started", "finished", "failed", "deferred", "canceled", "stopped")
HELD = "rate_limited"  # rq's status of a job its limit key holds back: "held" here, as ``/jobs/<id>/`` says
SCAN_LIMIT = 5000  # candidates one search reads at most (its HMGETs), from ``start``
CHUNK = 1000  # candidates per pipelined HMGET
PAGE_SIZE = 25
MAX_START = 1_000_000_000  # the deepest offset a search starts at (more than any index holds)
MAX_PAGE_SIZE = 100
TEXT_CHARS = 200  # longest search text
FIELDS = ("status", "origin", "data", "description", "enqueued_at", "created_at", "meta")


class InvalidSearch(QueuesError, ValueError):
    """A search criterion that cannot be used; the message names it, its value and what it takes."""


@dataclass
class Hit:
    job_id: str
    queue: str
    state: str
    function: str | None
    description: str
    enqueued_at: str | None  # ISO, as rq stores it (``created_at`` when never enqueued)


@dataclass
class Found:
    hits: list[Hit] = field(default_factory=list)
    start: int = 0  # where this page's scan began in the source
    next_start: int | None = None  # where the next page begins (None: the source is exhausted)
    scanned: int = 0  # candidates read by this search
    total: int = 0  # candidates in the source
    exact: bool = True  # no criterion checked on the jobs: every page is complete
    source: str = ""  # what was read, e.g. "queue default (index)", "failed jobs of default"
    gone: int = 0  # of ``scanned``, entries whose job no longer exists (dropped from an index source)
    misplaced: int = 0  # of ``scanned``, index entries whose job does not belong there (dropped: verify.py)


def search_jobs(
    *,
    function: str | None = None,
    queue: str | None = None,
    state: str | None = None,
    text: str | None = None,
    owner: str | None = None,
    start: int = 0,
    page_size: int = PAGE_SIZE,
    scan_limit: int = SCAN_LIMIT,
    connection: redis.Redis | None = None,
) -> Found:
    """Live jobs matching every criterion given, newest first: a ``Found``.

    ``function``: a dotted path (exact); ``queue``: a declared queue; ``state``: one of ``STATES``;
    ``text``: in the id, description or arguments (case-insensitive); ``owner``: ``meta["owner"]``;
    ``start``: the offset in the source (``Found.next_start`` of the page before). Raises
    ``InvalidSearch`` (or ``UnknownQueue``) for a bad criterion, ``QueueUnavailable`` when Redis fails.
    """

    if queue:
        get_config(queue)  # UnknownQueue names the declared ones
    if state and state not in STATES:
        raise InvalidSearch(f"state must be one of {', '.join(STATES)}, got {state!r}.")
    if text is not None and len(text) > TEXT_CHARS:
        raise InvalidSearch(f"text must be at most {TEXT_CHARS} characters, got {len(text)}.")
    for name, value in (("start", start), ("page_size", page_size), ("scan_limit", scan_limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "start" else 1):
            raise InvalidSearch(f"{name} must be an integer >= {0 if name == 'start' else 1}, got {value!r}.")
    for name, value, limit in (("start", start, MAX_START), ("page_size", page_size, MAX_PAGE_SIZE)):
        if value > limit:
            raise InvalidSearch(f"{name} must be at most {limit:,}, got {value}.")
    scan_limit = min(scan_limit, MAX_START)  # Redis takes offsets below 2**63: start + window stays far below
    connection = connection or get_connection()
    source = sources.source_for(function, queue, state, owner)
    checks = _checks(source, function, queue, state, text)
    try:
        return _run(connection, source, checks, start, page_size, scan_limit)
    except redis.RedisError as exc:
        raise unavailable(exc) from exc


def _checks(source, function, queue, state, text):
    """[(criterion, wanted)] left to check on each job."""
    wanted = {
        "function": function or None,
        "queue": queue or None,
        "state": state or None,
        "text": text.strip().casefold() if text and text.strip() else None,
    }
    return [(name, value) for name, value in wanted.items() if value is not None and name not in source.covers]


# --- reading and checking the jobs ---------------------------------------------------------------
def _run(connection, source, checks, start, page_size, scan_limit):
    exact = not checks
    window = page_size if exact else scan_limit
    total, ids = sources.total_and_ids(connection, source, start, window)
    found = Found(start=start, total=total, exact=exact, source=source.label)
    gone, misplaced = {}, {}  # index key -> [member] / [(member, job id, why)]: dropped from it
    position = start
    for first in range(0, len(ids), CHUNK):
        chunk = ids[first : first + CHUNK]
        with connection.pipeline(transaction=False) as pipe:
            for job_id, _key, _member in chunk:
                pipe.hmget(keys.job_key(job_id), FIELDS)
            replies = pipe.execute(raise_on_error=False)
        for (job_id, key, member), reply in zip(chunk, replies):
            position += 1
            found.scanned += 1
            if isinstance(reply, Exception):
                hit = Hit(job_id, "", "corrupt", None, "its key is not a hash", None)
                values, owner, unreadable = None, None, None
            elif reply[0] is None and reply[2] is None:
                gone.setdefault(key, []).append(member)
                continue
            else:
                hit, values, owner, unreadable = _hit(job_id, reply)
            # The set read vouches for nothing: the job's own owner, function and queue, before anything else.
            claim = source.claims.get(key)
            why = verify.belongs(*claim, hit.queue, hit.function, owner, unreadable) if claim else None
            if claim and isinstance(reply, Exception):
                why = "its key is not a hash"  # nothing of it can be checked
            if why is not None:  # rq's own lists and registries are the workers': only our index is pruned
                if source.index:
                    misplaced.setdefault(key, []).append((member, job_id, why))
                continue
            if _matches(hit, values, checks):
                found.hits.append(hit)
                if len(found.hits) == page_size:
                    break
        if len(found.hits) == page_size:
            break
    found.gone = sum(len(v) for v in gone.values())
    found.misplaced = sum(len(v) for v in misplaced.values())
    removed = 0
    if source.index:
        if gone:
            with connection.pipeline(transaction=False) as pipe:
                for key, members in gone.items():
                    pipe.zrem(key, *members)
                removed += sum(r for r in pipe.execute(raise_on_error=False) if isinstance(r, int))
        removed += verify.drop(connection, misplaced)
    # The entries removed sat before ``position``: the next page starts that much earlier, skipping none.
    found.next_start = position - removed if position < total else None
    return found


def _hit(job_id, reply):
    """(Hit, decoded payload or None, owner as text or None, why the job cannot be checked or None)."""
    status, origin, data, description, enqueued_at, created_at, meta = reply
    decoded = _decode(data)
    owner, unreadable = verify.meta_owner(meta)
    state = _text(status or b"") or "?"
    hit = Hit(
        job_id,
        _text(origin or b""),
        "held" if state == HELD else state,
        verify.function_of(decoded, data),
        _text(description or b""),
        _text(enqueued_at or created_at) if (enqueued_at or created_at) else None,
    )
    return hit, decoded, owner, unreadable


def _decode(data):
    """(func_name, instance, args, kwargs) from rq's ``data`` (zlib, JSON), or None: never unpickled."""
    if not data:
        return None
    try:
        inflated, whole = entries.inflate(data, entries.JOB_BYTES)
    except zlib.error:
        return None
    if not whole:
        return None
    try:
        payload = json.loads(inflated)
    except ValueError:  # not JSON (UnicodeDecodeError is one)
        return None
    if not isinstance(payload, list) or len(payload) != 4:
        return None
    return payload


def _matches(hit, decoded, checks):
    for name, wanted in checks:
        if name == "function" and hit.function != wanted:
            return False
        if name == "queue" and hit.queue != wanted:
            return False
        if name == "state" and hit.state != wanted:
            return False
        if name == "text" and not _has_text(hit, decoded, wanted):
            return False
    return True


def _has_text(hit, decoded, wanted):
    if wanted in hit.job_id.casefold() or wanted in hit.description.casefold():
        return True
    if decoded is None:
        return False
    arguments = json.dumps([decoded[2], decoded[3]], ensure_ascii=False, default=str)
    return wanted in arguments.casefold()


def _text(value):
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
