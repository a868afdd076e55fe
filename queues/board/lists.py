"""The panel's queue page and its job lists (issue 33): ours, in place of django-rq's, at django-rq's URLs.

- ``queue_details`` (``queues/queue.html``): counts per state (one pipeline, with the priority bands of the
  queued list, the ends of the queue, its workers and rq's scheduler lock), the oldest and newest queued job
  and the scheduler's PID (one pipeline), the jobs held by a limit key (``limits.keys_in_use``: two).
- ``job_list`` (``queues/jobs.html``), one view for every state (``STATES``): the tabs with their counts and
  the page's ids (two pipelines), the page's jobs (and, for the started list, rq's executions) in one more.
  Sorted sets read newest first unless ``?order=oldest``, the queued list next-to-run first unless
  ``?order=newest``; ``paging`` gives the slice (``?page=``, ``?per_page=``) and checks the order and the
  filter. ``?func=`` (text in the function's path) reads the first ``SCAN_LIMIT`` ids of the list and their
  functions (one round trip more: Redis cannot read a job's compressed ``data``), then pages the matching
  ones. ``?format=json``: the same page as JSON, with its ``data-live`` regions rendered by the page's
  partials (``queues/_jobs_*.html``) for ``live.js`` (``live.py``). A filter it cannot use: 400, saying why.
- ``confirm_bulk`` (``queues/confirm_bulk.html``): the confirmation of a bulk action of a list, posting to
  ``django_rq:actions`` (``rq_actions.bulk_actions``) the selected ids, or, for "Select all N jobs in
  <state>", ``select_across=1`` with the state and the filter (the action walks the state itself).

Every read is bounded (a page of at most ``paging.PER_PAGE_CHOICES[-1]`` jobs, each hash capped by
``jobread``), nothing is unpickled (``jobread``: JSON only, a poison job shown "corrupt: <why>"), nothing is
written, and a key of the wrong type reads as empty (``readonly.wrong_type``: reported once). A page never
asks a job its status (rq's ``get_status()`` is one round trip per job): the status read with the job is
shown. At most 5 Redis round trips per page, whatever its size (``tests/queues/board/test_lists.py``).
"""

import datetime as dt
import math
from dataclasses import dataclass

import redis
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django_rq.settings import get_queues_list
from rq.executions import Execution
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues.board import paging
from queues.board.access import panel_context
from queues.board.readonly import REGISTRIES, get_queue_by_index, wrong_type
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.producer import limits
from queues.search import verify
from queues.templatetags.queues_lists import callable_of, list_state

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


def _pipelined(connection, calls):
    """One round trip: ``calls`` are ``(key, command, args, empty)``; a key of the wrong type reads as
    ``empty`` (reported once), any other error is raised (a connection error: the guard's 503)."""
    with connection.pipeline(transaction=False) as pipe:
        for key, command, args, _ in calls:
            getattr(pipe, command)(key, *args)
        replies = pipe.execute(raise_on_error=False)
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


def _count_calls(queue):
    return [(key, "llen", (), 0) for key in queue.band_keys] + [
        (_registry_key(queue, state), "zcard", (), 0) for state in STATES if state.registry
    ]


def _counts(queue, replies):
    """{state key: count, "bands": [high, normal, low]} from the replies of ``_count_calls``."""
    bands = [int(n) for n in replies[: len(BANDS)]]
    counts = {"bands": bands, "queued": sum(bands)}
    registries = [s.key for s in STATES if s.registry]
    counts.update(zip(registries, [int(n) for n in replies[len(BANDS) : len(BANDS) + len(registries)]]))
    return counts


def _tabs(queue_index, counts, current=None):
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
    calls = _count_calls(queue)
    calls += [(key, "lindex", (0,), None) for key in queue.band_keys]
    calls += [(key, "lindex", (-1,), None) for key in queue.band_keys]
    calls += [(workers_key, "smembers", (), set()), (lock_key, "get", (), None)]
    replies = _pipelined(connection, calls)  # 1
    counts = _counts(queue, replies)
    n = len(_count_calls(queue))
    heads, tails = replies[n : n + 3], replies[n + 3 : n + 6]
    members, lock = replies[n + 6], replies[n + 7]
    num_workers = len([m for m in members if _text_or_none(workers_key, m, "a member") is not None])
    oldest_id = next((h for h in heads if h is not None), None)
    newest_id = next((t for t in reversed(tails) if t is not None), None)
    scheduler = _text_or_none(lock_key, lock, "the lock's holder")
    ends = [i for i in (oldest_id, newest_id) if i is not None]
    calls = [(jobread.job_key(jobread.normal_id(i)), "hgetall", (), None) for i in ends]
    if scheduler is not None:
        calls.append((SCHEDULER_KEY_TEMPLATE % scheduler, "hget", ("pid",), None))
    # 2: the ends and the PID (a job hash of the wrong type comes back as an error: jobread says corrupt).
    replies = _raw_pipeline(connection, calls)
    jobs = [jobread.load(jobread.normal_id(i), r, connection) for i, r in zip(ends, replies)]
    oldest = jobs[0] if ends and oldest_id is not None else None
    newest = jobs[-1] if ends and newest_id is not None else None
    scheduler_pid = _pid(lock_key, replies[len(ends)]) if scheduler is not None else None
    context = {
        **panel_context(request),
        "title": f"Queue {queue.name}",
        "queue": queue,
        "queue_index": queue_index,
        "tabs": _tabs(queue_index, counts),
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


def _raw_pipeline(connection, calls):
    """One round trip, every reply as Redis gave it (errors included: ``jobread.load`` reads them)."""
    if not calls:
        return []
    with connection.pipeline(transaction=False) as pipe:
        for key, command, args, _ in calls:
            getattr(pipe, command)(key, *args)
        replies = pipe.execute(raise_on_error=False)
    for reply in replies:
        if isinstance(reply, Exception) and not isinstance(reply, redis.ResponseError):
            raise reply
    return replies


def _pid(lock_key, reply):
    if isinstance(reply, redis.ResponseError):
        return wrong_type(f"the scheduler lock of {lock_key}", reply, None)
    try:
        return int(reply) if reply else None
    except (ValueError, UnicodeDecodeError):
        entries.report(lock_key, "its scheduler's PID is not a number: no PID shown")
        return None


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


def _page_ids(queue, state, counts, offset, length, newest):
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
        replies = _pipelined(connection, [(bands[i], "lrange", (start, end), []) for i, start, end in slices])
        found = [(member, None, None) for reply in replies for member in reply]
        return found[::-1] if newest else found
    key = _registry_key(queue, state)
    [members] = _pipelined(connection, [(key, "zrange", (offset, offset + length - 1, newest, True), [])])
    found = []
    for member, score in members:
        if state.key == "started":  # "<job id>:<execution id>"
            job_id, _, execution_id = member.partition(b":")
            found.append((job_id, score, jobread.text(execution_id)))
        else:
            found.append((member, score, None))
    return found


def _functions(connection, entries_read):
    """The function path of each entry's job (None: gone or unreadable), from the opening of its ``data``: one
    round trip (an HMGET per job; nothing unpickled, ``verify.function_of`` inflates 2 KiB at most)."""
    calls = [(jobread.job_key(jobread.normal_id(raw)), "hget", ("data",), None) for raw, _, _ in entries_read]
    return [
        None if isinstance(data, Exception) else verify.function_of(None, data)
        for data in _raw_pipeline(connection, calls)
    ]


@dataclass
class Listed:
    """The entries of a list a page shows, and how many match its filter."""

    page: paging.Page
    entries: list
    matching: int  # jobs of the state matching the filter (all of them without one)
    exact: bool  # False: a filter read only the first ``SCAN_LIMIT`` of the state's jobs
    scanned: int


def _listed(request, queue, spec, counts, query):
    """The page's entries: without a filter one read of its ids (one round trip); with ``?func=`` the first
    ``SCAN_LIMIT`` ids of the list in its order, their functions, then the page of the matching ones (two)."""
    total, newest = counts[spec.key], query.order == "newest"
    if not query.func:
        page = paging.page_of(request, total)
        found = _page_ids(queue, spec, counts, page.offset, page.per_page, newest) if total else []
        return Listed(page, found, total, True, 0)
    candidates = _page_ids(queue, spec, counts, 0, min(total, SCAN_LIMIT), newest)
    functions = _functions(queue.connection, candidates) if candidates else []
    matching = [entry for entry, function in zip(candidates, functions) if query.matches(function)]
    page = paging.page_of(request, len(matching))
    shown = matching[page.offset : page.offset + page.per_page]
    return Listed(page, shown, len(matching), total <= SCAN_LIMIT, len(candidates))


def _rows(queue, state, page_ids):
    """The page's jobs (and executions of the started list), one round trip; an id whose job hash is gone is
    left out (an execution whose hash is gone or unreadable too)."""
    connection = queue.connection
    ids = [jobread.normal_id(raw) for raw, _, _ in page_ids]
    calls = [(jobread.job_key(i), "hgetall", (), None) for i in ids]
    executions = []
    for i, (_, _, execution_id) in zip(ids, page_ids):
        if execution_id is not None:
            execution = Execution(id=execution_id, job_id=jobread.text(i), connection=connection)
            executions.append(execution)
            calls.append((execution.key, "hgetall", (), None))
    replies = _raw_pipeline(connection, calls)
    jobs = [jobread.load(i, r, connection) for i, r in zip(ids, replies)]
    rows = []
    for position, (job, (raw, score, execution_id)) in enumerate(zip(jobs, page_ids)):
        if job is None:
            continue
        row = Row(job)
        if execution_id is not None:
            execution, data = executions[position], replies[len(ids) + position]
            try:
                execution.restore(data)
            except (KeyError, ValueError, TypeError, OverflowError, OSError, AttributeError):
                continue  # gone, or rq cannot read it: not listed (as before)
            row.execution = execution
        if state.key == "scheduled":
            row.scheduled_at = _time(_registry_key(queue, state), raw, score)
        rows.append(row)
    return rows


def _page_url(request, **changes):
    """This list's URL with ``changes`` to its query (its filter and order kept; never the JSON form)."""
    query = request.GET.copy()
    query.pop("format", None)
    for name, value in changes.items():
        if value is None:
            query.pop(name, None)
        else:
            query[name] = value
    return f"?{query.urlencode()}"


def _wants_json(request):
    return request.GET.get("format") == "json"


def _bad_filter(request, queue, queue_index, spec, counts, error):
    """The list answered with what was wrong with its filter (400): the field, the value, the fix."""
    if _wants_json(request):
        return JsonResponse({"error": str(error), "field": error.field, "value": error.value}, status=400)
    context = {
        **panel_context(request),
        "title": f"{spec.label} jobs in {queue.name}",
        "queue": queue,
        "queue_index": queue_index,
        "state": spec,
        "tabs": _tabs(queue_index, counts, spec.key),
        "filter_error": str(error),
        "func": request.GET.get("func", "")[: paging.FUNC_CHARS],
        "order": request.GET.get("order") if request.GET.get("order") in paging.ORDERS else "",
        "clear_url": _page_url(request, func=None, order=None, page=None),
    }
    return render(request, "queues/jobs.html", context, status=400)


@never_cache
def job_list(request, queue_index, state):
    """The jobs of a queue in one state (``STATES``): three round trips, four with ``?func=``. With
    ``?format=json`` the same page as JSON (``_as_json``: what ``live.js`` swaps in)."""
    queue = get_queue_by_index(queue_index)
    spec = BY_KEY[state]
    counts = _counts(queue, _pipelined(queue.connection, _count_calls(queue)))  # 1
    try:
        query = paging.query_of(request, default_order="newest" if spec.registry else "oldest")
    except paging.BadFilter as error:
        return _bad_filter(request, queue, queue_index, spec, counts, error)
    listed = _listed(request, queue, spec, counts, query)  # 2 (and 3 with a filter)
    rows = _rows(queue, spec, listed.entries) if listed.entries else []  # 3 (4)
    page = listed.page
    can_act = request.queue_access.can_act
    context = {
        **panel_context(request),
        "title": f"{spec.label} jobs in {queue.name}",
        "queue": queue,
        "queue_index": queue_index,
        "state": spec,
        "tabs": _tabs(queue_index, counts, state),
        "bands": list(zip(BANDS, counts["bands"])) if spec.registry is None else [],
        "columns": [(name, COLUMN_LABELS[name]) for name in spec.columns],
        "rows": rows,
        "num_jobs": listed.matching,
        "total_jobs": counts[state],
        "exact": listed.exact,
        "scanned": listed.scanned,
        "func": query.func,
        "page": page,
        "page_links": [(p, _page_url(request, page=p) if p else "") for p in page.links],
        "per_page_links": [(n, _page_url(request, per_page=n, page=1)) for n in paging.PER_PAGE_CHOICES],
        "order": query.order,
        "order_links": [(o, _page_url(request, order=o, page=1)) for o in paging.ORDERS],
        "clear_url": _page_url(request, func=None, page=None),
        "json_url": _page_url(request, format="json"),
        "can_act": can_act,
        "actions": spec.actions if can_act else (),
    }
    if _wants_json(request):
        return _as_json(request, context, counts)
    return render(request, "queues/jobs.html", context)


def _iso(value):
    return value.isoformat() if value else None


def _row_json(row):
    job = row.job
    return {
        "id": jobread.text(job.id),
        "state": list_state(job),
        "function": callable_of(job),
        "corrupt": jobread.is_corrupt(job),
        "created_at": _iso(job.created_at),
        "enqueued_at": _iso(job.enqueued_at),
        "ended_at": _iso(job.ended_at),
        "scheduled_at": _iso(row.scheduled_at),
        "execution": row.execution.id if row.execution is not None else None,
    }


def _as_json(request, context, counts):
    """The page as JSON: its counts, its rows, and the parts of the page ``live.js`` replaces, rendered by
    the page's own templates (``data-live`` regions), so the script draws nothing itself."""
    page = context["page"]
    parts = {
        name: render_to_string(f"queues/_jobs_{name}.html", context, request=request)
        for name in ("rows", "pager", "tabs", "across")
    }
    return JsonResponse(
        {
            "queue": context["queue"].name,
            "state": context["state"].key,
            "order": context["order"],
            "func": context["func"],
            "counts": {state.key: counts[state.key] for state in STATES},
            "bands": dict(zip(BANDS, counts["bands"])),
            "num_jobs": context["num_jobs"],
            "exact": context["exact"],
            "page": page.number,
            "num_pages": page.num_pages,
            "per_page": page.per_page,
            "rows": [_row_json(row) for row in context["rows"]],
            "html": parts,
        }
    )


def _list_view(state):
    def view(request, queue_index):
        return job_list(request, queue_index, state)

    view.__name__ = view.__qualname__ = f"{state}_jobs"
    view.__doc__ = f"The {state} jobs of a queue (``job_list``)."
    return view


queued_jobs = _list_view("queued")
started_jobs = _list_view("started")
deferred_jobs = _list_view("deferred")
finished_jobs = _list_view("finished")
failed_jobs = _list_view("failed")
scheduled_jobs = _list_view("scheduled")
canceled_jobs = _list_view("canceled")


def _back(request, queue_index):
    referer = request.META.get("HTTP_REFERER", "")
    safe = url_has_allowed_host_and_scheme(referer, {request.get_host()}, require_https=request.is_secure())
    return referer if referer and safe else reverse("django_rq:jobs", args=[queue_index])


@never_cache
def confirm_bulk(request, queue_index):
    """The confirmation of a list's bulk action (the list POSTs ``action`` and ``_selected_action``): the
    selected jobs (one round trip), a button POSTing them to ``django_rq:actions``. Without an action or a
    job: back to the list. With ``select_across=1``: every job of ``state`` (matching ``func``), counted
    (``_confirm_across``)."""
    queue = get_queue_by_index(queue_index)
    next_url = _back(request, queue_index)
    action = request.POST.get("action", "") if request.method == "POST" else ""
    if action and request.POST.get("select_across") == "1":
        return _confirm_across(request, queue, queue_index, action, next_url)
    job_ids = list(dict.fromkeys(request.POST.getlist("_selected_action")))
    if not action or not job_ids:
        return redirect(next_url)
    if len(job_ids) > MAX_SELECTED:
        messages.error(request, f"{len(job_ids)} jobs selected: at most {MAX_SELECTED} at a time.")
        return redirect(next_url)
    jobs = jobread.fetch_many(job_ids, queue.connection)
    context = {
        **panel_context(request),
        "title": "Are you sure?",
        "queue": queue,
        "queue_index": queue_index,
        "action": action,
        "rows": [{"id": i, "job": job} for i, job in zip(job_ids, jobs)],
        "job_ids": [i for i, job in zip(job_ids, jobs) if job is not None],
        "next_url": next_url,
    }
    return render(request, "queues/confirm_bulk.html", context)


def _confirm_across(request, queue, queue_index, action, next_url):
    """All N jobs in <state> (whose function contains ``func``): the count as the list states it (one
    round trip, three with a filter), and a form POSTing ``select_across=1``, ``state``, ``func`` and the
    action to ``django_rq:actions``, which walks the state itself. A state, action or filter it cannot use:
    back to the list, with a message naming it."""
    state = request.POST.get("state", "")
    spec = BY_KEY.get(state)
    if spec is None:
        messages.error(request, f"state={state!r} cannot be used: one of {', '.join(BY_KEY)}.")
        return redirect(next_url)
    if action not in spec.actions:
        messages.error(
            request, f"action={action!r} cannot be used on {spec.label.lower()} jobs: one of {', '.join(spec.actions)}."
        )
        return redirect(next_url)
    try:
        func = paging.func_filter(request.POST.get("func"))
    except paging.BadFilter as error:
        messages.error(request, str(error))
        return redirect(next_url)
    counts = _counts(queue, _pipelined(queue.connection, _count_calls(queue)))  # 1
    count, exact = counts[state], True
    if func:
        candidates = _page_ids(queue, spec, counts, 0, min(count, SCAN_LIMIT), True)  # 2
        functions = _functions(queue.connection, candidates) if candidates else []  # 3
        count = sum(1 for function in functions if paging.Query("newest", func).matches(function))
        exact = counts[state] <= SCAN_LIMIT
    context = {
        **panel_context(request),
        "title": "Are you sure?",
        "queue": queue,
        "queue_index": queue_index,
        "action": action,
        "across": {"state": spec, "func": func, "count": count, "exact": exact, "total": counts[state]},
        "scan_limit": SCAN_LIMIT,
        "next_url": next_url,
    }
    return render(request, "queues/confirm_bulk.html", context)
