"""The reads of the queue page and the job lists: the states and their keys, the counts (one pipeline), a
window of a list's ids (one), their functions (one, for ``?func=``), the page's jobs (one). A key of the wrong
type reads as empty (reported once); nothing is written or unpickled.
"""

import datetime as dt
import math
from dataclasses import dataclass

import redis
from django.urls import reverse

from queues.board import paging
from queues.board.readonly import REGISTRIES, wrong_type
from queues.jobs import capped
from queues.jobs import execution as execution_record
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.search import verify

BANDS = ("high", "normal", "low")
SCAN_LIMIT = 2000  # jobs of a state a ?func= filter reads (their function), first in the list's order
MAX_SELECTED = paging.PER_PAGE_CHOICES[-1]  # jobs one confirmation page reads (a whole page of the list)


@dataclass(frozen=True)
class State:
    key: str  # as the tabs and the template name it
    url_name: str  # django-rq's URL name (ours for canceled)
    label: str
    registry: str | None  # the read-only registry (readonly.REGISTRIES); None: the queue's lists
    actions: tuple  # the bulk actions of its dropdown (rq_actions.BULK_VERBS)
    columns: tuple  # its time columns, as django-rq's page of it showed them


STATES = (
    State("queued", "jobs", "Queued", None, ("delete",), ("created", "enqueued", "ended")),
    State("started", "started_jobs", "Started", "StartedJobRegistry", ("delete", "stop"), ("started", "heartbeat")),
    State("deferred", "deferred_jobs", "Deferred", "DeferredJobRegistry", ("delete",), ("created",)),
    State(
        "finished",
        "finished_jobs",
        "Finished",
        "FinishedJobRegistry",
        ("delete", "requeue"),
        ("created", "enqueued", "ended"),
    ),
    State(
        "failed", "failed_jobs", "Failed", "FailedJobRegistry", ("delete", "requeue"), ("created", "enqueued", "ended")
    ),
    State("scheduled", "scheduled_jobs", "Scheduled", "ScheduledJobRegistry", ("delete",), ("created", "scheduled")),
    State("canceled", "queues_canceled", "Canceled", "CanceledJobRegistry", ("delete",), ("created", "enqueued")),
)
BY_KEY = {state.key: state for state in STATES}
COLUMN_LABELS = {
    "created": "Created",
    "enqueued": "Enqueued",
    "ended": "Ended",
    "started": "Started",
    "heartbeat": "Last heartbeat",
    "scheduled": "Scheduled",
}


def pipelined(connection, calls):
    """One round trip: ``calls`` are ``(key, command, args, empty)``; a key of the wrong type reads as
    ``empty`` (reported once), any other error is raised (a connection error: the guard's 503)."""
    replies = _send(connection, calls)
    read = []
    for (key, _, _, empty), reply in zip(calls, replies):
        if isinstance(reply, redis.ResponseError):
            reply = wrong_type(key, reply, empty)
        elif isinstance(reply, Exception):
            raise reply
        read.append(reply)
    return read


def _registry_key(queue, state):
    return REGISTRIES[state.registry](queue=queue).key


def count_calls(queue):
    return [(key, "llen", (), 0) for key in queue.band_keys] + [
        (_registry_key(queue, state), "zcard", (), 0) for state in STATES if state.registry
    ]


def counts_from(queue, replies):
    """{state key: count, "bands": [high, normal, low]} from the replies of ``count_calls``."""
    bands = [int(n) for n in replies[: len(BANDS)]]
    counts = {"bands": bands, "queued": sum(bands)}
    registries = [s.key for s in STATES if s.registry]
    counts.update(zip(registries, [int(n) for n in replies[len(BANDS) : len(BANDS) + len(registries)]]))
    return counts


def tabs_of(queue_index, counts, current=None):
    return [
        {
            "key": state.key,
            "label": state.label,
            "count": counts[state.key],
            "url": reverse(f"django_rq:{state.url_name}", args=[queue_index]),
            "current": state.key == current,
        }
        for state in STATES
    ]


def _send(connection, calls):
    """``calls`` (``(key, command, args, empty)``) in one round trip -> their replies, errors in place. A command is a
    redis-py method's name, or a function that queues a read of the app's own (``capped.read_key``)."""
    with connection.pipeline(transaction=False) as pipe:
        for key, command, args, _ in calls:
            if callable(command):
                command(pipe, key, *args)
            else:
                getattr(pipe, command)(key, *args)
        return pipe.execute(raise_on_error=False)


def raw_pipeline(connection, calls):
    """One round trip, every reply as Redis gave it (errors included: ``jobread.load`` reads them)."""
    if not calls:
        return []
    replies = _send(connection, calls)
    for reply in replies:
        if isinstance(reply, Exception) and not isinstance(reply, redis.ResponseError):
            raise reply
    return replies


def _band_slices(bands, offset, length):
    """[(band index, start, end)] of the ``length`` ids from ``offset`` across the bands, in pop order."""
    slices = []
    for index, size in enumerate(bands):
        if length <= 0:
            break
        if offset >= size:
            offset -= size
            continue
        take = min(length, size - offset)
        slices.append((index, offset, offset + take - 1))
        length -= take
        offset = 0
    return slices


def _time(key, member, score):
    """A sorted-set score as a time (UTC); one that is no time reads as none (reported)."""
    if math.isfinite(score) and 0 <= score < 2**40:
        return dt.datetime.fromtimestamp(score, dt.UTC)
    entries.report(key, f"member {jobread.text(member)!r} has the score {score}, not a time: shown without one")
    return None


@dataclass
class Row:
    job: object
    execution: object = None
    scheduled_at: object = None


def window_ids(queue, state, counts, offset, length, newest):
    """[(raw id, score or None, execution id or None)] of ``length`` entries from ``offset``, one round trip.
    The queued list reads in pop order (``newest``: from its other end, the last band's tail first)."""
    connection = queue.connection
    if length <= 0:
        return []
    if state.registry is None:
        total = sum(counts["bands"])
        if newest:  # the same window counted from the tail, read in pop order, then turned round
            end = max(0, total - offset)
            offset, length = max(0, end - length), min(length, end)
        slices = _band_slices(counts["bands"], offset, length)
        bands = queue.band_keys
        replies = pipelined(connection, [(bands[i], "lrange", (start, end), []) for i, start, end in slices])
        found = [(member, None, None) for reply in replies for member in reply]
        return found[::-1] if newest else found
    key = _registry_key(queue, state)
    [members] = pipelined(connection, [(key, "zrange", (offset, offset + length - 1, newest, True), [])])
    found = []
    for member, score in members:
        if state.key == "started":  # "<job id>:<execution id>"
            job_id, _, execution_id = member.partition(b":")
            found.append((job_id, score, jobread.text(execution_id)))
        else:
            found.append((member, score, None))
    return found


def functions_of(connection, entries_read):
    """The function path of each entry's job (None: gone, unreadable, or a ``data`` longer than a job's can be), from
    the opening of its ``data``: one round trip (a size-checked read of it per job, ``capped.read_field``: a planted
    100 MB ``data`` is not read; nothing unpickled, ``verify.function_of`` inflates 2 KiB at most)."""
    calls = [
        (jobread.job_key(jobread.normal_id(raw)), capped.read_field, ("data",), None) for raw, _, _ in entries_read
    ]
    return [
        verify.function_of(None, data) if isinstance(data, bytes) else None for data in raw_pipeline(connection, calls)
    ]


@dataclass
class Listed:
    """The entries of a list a page shows, and how many match its filter."""

    page: paging.Page
    entries: list
    matching: int  # jobs of the state matching the filter (all of them without one)
    exact: bool  # False: a filter read only the first ``SCAN_LIMIT`` of the state's jobs
    scanned: int


def list_page(request, queue, spec, counts, query):
    """The page's entries: without a filter one read of its ids (one round trip); with ``?func=`` the first
    ``SCAN_LIMIT`` ids of the list in its order, their functions, then the page of the matching ones (two)."""
    total, newest = counts[spec.key], query.order == "newest"
    if not query.func:
        page = paging.page_of(request, total)
        found = window_ids(queue, spec, counts, page.offset, page.per_page, newest) if total else []
        return Listed(page, found, total, True, 0)
    candidates = window_ids(queue, spec, counts, 0, min(total, SCAN_LIMIT), newest)
    functions = functions_of(queue.connection, candidates) if candidates else []
    matching = [entry for entry, function in zip(candidates, functions) if query.matches(function)]
    page = paging.page_of(request, len(matching))
    shown = matching[page.offset : page.offset + page.per_page]
    return Listed(page, shown, len(matching), total <= SCAN_LIMIT, len(candidates))


def rows_of(queue, state, page_ids):
    """The page's jobs (and executions of the started list), one round trip; an id whose job hash is gone is
    left out, and a started entry that is not its job's current execution (``jobs/execution.shown``)."""
    connection = queue.connection
    ids = [jobread.normal_id(raw) for raw, _, _ in page_ids]
    calls = [(jobread.job_key(i), capped.read_key, (), None) for i in ids]
    for i, (_, _, execution_id) in zip(ids, page_ids):
        if execution_id is not None:  # the hash a release before issue 36's fifth pass wrote
            calls.append((keys.execution_key(f"{jobread.text(i)}:{execution_id}"), "hgetall", (), None))
    replies = raw_pipeline(connection, calls)
    hashes = [capped.hash_of(r) for r in replies[: len(ids)]]  # the jobs' (the executions' are HGETALL's)
    jobs = [jobread.load(i, r, connection) for i, r in zip(ids, hashes)]
    rows = []
    for position, (job, (raw, score, execution_id)) in enumerate(zip(jobs, page_ids)):
        if job is None:
            continue
        row = Row(job)
        if execution_id is not None:
            try:
                row.execution = execution_record.shown(
                    job, execution_id, hashes[position], replies[len(ids) + position]
                )
            except (KeyError, ValueError, TypeError, OverflowError, OSError, AttributeError):
                continue  # rq cannot read it: not listed (as before)
            if row.execution is None:
                continue
        if state.key == "scheduled":
            row.scheduled_at = _time(_registry_key(queue, state), raw, score)
        rows.append(row)
    return rows
