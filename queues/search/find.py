"""``search_jobs``: live jobs by function, owner, queue, state and text, newest first, a page at a time.

One source is read, the most selective the search allows, then the other criteria are checked on
the jobs themselves (the whole scan's HMGETs in one pipeline):

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
100,000 jobs in one request. A search costs at most 4 round trips: the source's size and ids (two
for a queue's queued jobs, its lists' lengths then their ids, else one), the scan's hashes (one
pipeline), and the index entries it drops (one pipeline, only when there are some). (Merged, each
queue's set is read up to ``start`` plus the window: a page deep into an every-queue search reads
more than one near its start.)

With several Redis servers (QUEUES_REDIS_SERVERS) a search with a ``queue`` reads that queue's server; one
without reads every server, one after the other (``across.py``: ``start`` runs through them end to end, and a
server that does not answer is passed over, named in ``Found.servers_down``).

``text`` matches, case-insensitively, the job id, its description, or its arguments: the job's
``data`` is zlib-compressed JSON (rq's JSONSerializer, the only one this project uses), inflated
at most to ``entries.JOB_BYTES`` and parsed with ``json`` — nothing is ever unpickled. The text is
first looked for in the inflated JSON itself (``_may_hold``): a job whose raw text cannot hold it is
not parsed, and one that may is parsed and matched as before: the same results for any payload as
rq's JSONSerializer writes it. A job is parsed only for what needs it (a text its raw JSON may hold);
its function is read from the opening of its JSON.

A candidate whose job hash is gone (expired, deleted) is removed from the index it was read from
(the lazy half of "the index expires with the job": queues/search/index.py). A candidate whose job
does not match the set it was read from (its own ``meta["owner"]``, function, queue: a planted
entry) is never shown nor its text matched, and is removed too (``verify.py``); the next page then
starts that many entries earlier, so none is skipped. ``start`` is at most ``MAX_START``: a larger
one is refused (``InvalidSearch``), and only a WRONGTYPE reply reports an index key as corrupt.
"""

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from queues.catalog.lookup import get_config
from queues.connection import servers
from queues.connection.clients import get_connection, unavailable
from queues.exceptions import QueuesError
from queues.keyspace import entries, keys
from queues.search import across, sources, verify

STATES = ("queued", "scheduled", "held", "started", "finished", "failed", "deferred", "canceled", "stopped")
HELD = "rate_limited"  # rq's status of a job its limit key holds back: "held" here, as ``/jobs/<id>/`` says
SCAN_LIMIT = 5000  # candidates one search reads at most (its HMGETs), from ``start``
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
    servers_down: list[str] = field(default_factory=list)  # Redis servers passed over: they did not answer


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
    connect: "Callable[[str], redis.Redis] | None" = None,
) -> Found:
    """Live jobs matching every criterion given, newest first: a ``Found``.

    ``function``: a dotted path (exact); ``queue``: a declared queue; ``state``: one of ``STATES``;
    ``text``: in the id, description or arguments (case-insensitive); ``owner``: ``meta["owner"]``;
    ``start``: the offset in the source (``Found.next_start`` of the page before); ``connection``: the one Redis
    to read; else ``connect(server name)`` gives each server's client (default: the app's). Raises
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
    source = sources.source_for(function, queue, state, owner)
    checks = _checks(source, function, queue, state, text)
    connect = connect or get_connection
    if connection is None and queue:
        connection = connect(servers.of_queue(queue))  # the queue's own server holds its jobs and their index
    if connection is None and servers.several():  # every server, laid end to end (queues/search/across.py)
        clients = {server: connect(server) for server in servers.names()}
        return across.search_servers(
            clients,
            lambda client, at, size, limit: _run(client, source, checks, at, size, limit),
            start,
            page_size,
            scan_limit,
            lambda exc, client: unavailable(exc, connection=client),
        )
    connection = connection or get_connection()
    try:
        return _run(connection, source, checks, start, page_size, scan_limit)
    except redis.RedisError as exc:
        raise unavailable(exc, connection=connection) from exc


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
    with connection.pipeline(transaction=False) as pipe:  # the whole scan's hashes: one round trip
        for job_id, _key, _member in ids:
            pipe.hmget(keys.job_key(job_id), FIELDS)
        replies = pipe.execute(raise_on_error=False) if ids else []
    for (job_id, key, member), reply in zip(ids, replies):
        position += 1
        found.scanned += 1
        if isinstance(reply, Exception):
            job = None
        elif reply[0] is None and reply[2] is None:
            gone.setdefault(key, []).append(member)
            continue
        else:
            job = _Job(job_id, reply)
        # The set read vouches for nothing: the job's own owner, function and queue, before anything else.
        claim = source.claims.get(key)
        if claim is None:
            why = None
        elif job is None:
            why = "its key is not a hash"  # nothing of it can be checked
        else:
            why = verify.belongs(*claim, **job.claimed(claim[0]))
        if why is not None:  # rq's own lists and registries are the workers': only our index is pruned
            if source.index:
                misplaced.setdefault(key, []).append((member, job_id, why))
            continue
        if job is None:
            hit = Hit(job_id, "", "corrupt", None, "its key is not a hash", None)
            if _matches(hit, None, checks):
                found.hits.append(hit)
        elif job.matches(checks):
            found.hits.append(job.hit())
        if len(found.hits) == page_size:
            break
    found.gone = sum(len(v) for v in gone.values())
    found.misplaced = sum(len(v) for v in misplaced.values())
    removed = verify.drop(connection, misplaced, gone) if source.index else 0
    # The entries removed sat before ``position``: the next page starts that much earlier, skipping none.
    found.next_start = position - removed if position < total else None
    return found


class _Job:
    """One candidate's hash (the ``FIELDS`` of an HMGET), read only as far as a check needs: its payload is
    inflated and parsed once, and only for a criterion on its function or arguments, or when it is shown."""

    def __init__(self, job_id, reply):
        self.job_id = job_id
        self.status, self.origin, self.data, self.description, self.enqueued_at, self.created_at, self.meta = reply
        self.queue = _text(self.origin or b"")
        state = _text(self.status or b"") or "?"
        self.state = "held" if state == HELD else state
        self._inflated = self._decoded = _UNREAD

    def claimed(self, criterion):
        """What ``verify.belongs`` compares for ``criterion``: only that is read."""
        owner, unreadable = verify.meta_owner(self.meta) if criterion == "owner" else (None, None)
        function = self.function() if criterion == "function" else None
        return {"queue": self.queue, "function": function, "owner": owner, "owner_unreadable": unreadable}

    def inflated(self):
        """rq's ``data`` inflated (bytes), or None when it is empty, not zlib, or larger than ``JOB_BYTES``."""
        if self._inflated is _UNREAD:
            self._inflated = _inflate(self.data)
        return self._inflated

    def decoded(self):
        if self._decoded is _UNREAD:
            self._decoded = _parse(self.inflated())
        return self._decoded

    def function(self):
        if self._decoded is _UNREAD and self.inflated() is not None:  # its opening says it: not parsed
            function = verify.function_at(self.inflated()[:2048])
            if function is not None:
                return function
        return verify.function_of(self.decoded(), self.data)

    def matches(self, checks):
        for name, wanted in checks:
            if name == "function" and self.function() != wanted:
                return False
            if name == "queue" and self.queue != wanted:
                return False
            if name == "state" and self.state != wanted:
                return False
            if name == "text" and not self.has_text(wanted):
                return False
        return True

    def has_text(self, wanted):
        if wanted in self.job_id.casefold() or wanted in _text(self.description or b"").casefold():
            return True
        if not _may_hold(self.inflated(), wanted):  # its raw JSON cannot hold it: not parsed
            return False
        return _in_arguments(self.decoded(), wanted)

    def hit(self):
        when = self.enqueued_at or self.created_at
        description = _text(self.description or b"")
        return Hit(self.job_id, self.queue, self.state, self.function(), description, _text(when) if when else None)


_UNREAD = object()


def _inflate(data):
    if not data:
        return None
    try:
        inflated, whole = entries.inflate(data, entries.JOB_BYTES)
    except zlib.error:
        return None
    return inflated if whole else None


def _parse(inflated):
    """(func_name, instance, args, kwargs) from rq's inflated ``data`` (JSON), or None: never unpickled."""
    if inflated is None:
        return None
    try:
        payload = json.loads(inflated)
    except ValueError:  # not JSON (UnicodeDecodeError is one)
        return None
    if not isinstance(payload, list) or len(payload) != 4:
        return None
    return payload


def _may_hold(inflated, wanted):
    """False only when the arguments of the payload ``inflated`` cannot contain ``wanted`` (casefolded) as
    ``_in_arguments`` looks for it, read from the raw JSON without parsing it; True when they may (or when
    the raw text cannot tell).

    rq's JSONSerializer writes ``json.dumps([function, instance, args, kwargs])``: ASCII, with every
    non-ASCII character as a ``\\uXXXX`` escape. ``_in_arguments`` looks in ``json.dumps([args, kwargs],
    ensure_ascii=False)``: the same text from ``args`` on, non-ASCII characters written as they are, and
    opening with ``[`` where the raw text has ``, ``. So the raw text, its escapes of non-ASCII characters
    read back (``_unescape``) and casefolded, holds every text the arguments hold, but for one that opens with
    that ``[`` (those are parsed). A payload that is not UTF-8, or holds a NUL byte (UTF-16 or -32, which
    ``json.loads`` also reads), is parsed too."""
    if inflated is None:
        return False  # nothing to parse: no arguments (as ``_decode`` gives None)
    if wanted.startswith("[") or b"\x00" in inflated:
        return True
    try:
        raw = inflated.decode("utf-8")
    except UnicodeDecodeError:
        return True
    if "\\u" in raw:
        raw = _ESCAPE.sub(_unescape, raw)
    return wanted in raw.casefold()


# A backslash and what it escapes: a pair of surrogates (one astral character), another \uXXXX, or one character.
_ESCAPE = re.compile(r"\\(u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)", re.DOTALL)


def _unescape(match):
    """A ``\\uXXXX`` escape of a non-ASCII character (or a surrogate pair) as that character, as
    ``json.dumps(ensure_ascii=False)`` writes it; any other escape (``\\"``, ``\\n``, ``\\u001f``) kept."""
    escaped = match.group(1)
    if escaped[0] not in "uU" or len(escaped) == 1:
        return match.group(0)
    if len(escaped) == 11:  # a surrogate pair
        high, low = int(escaped[1:5], 16), int(escaped[7:11], 16)
        return chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    code = int(escaped[1:5], 16)
    return chr(code) if code >= 0x7F else match.group(0)


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
    return _in_arguments(decoded, wanted)


def _in_arguments(decoded, wanted):
    if decoded is None:
        return False
    arguments = json.dumps([decoded[2], decoded[3]], ensure_ascii=False, default=str)
    return wanted in arguments.casefold()


def _text(value):
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else str(value)
