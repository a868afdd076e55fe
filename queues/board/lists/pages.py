"""The job lists (``queues/jobs.html``), one view for every state, and their JSON (``?format=json``)."""

from django.http import JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache

from queues.board import paging
from queues.board.access import panel_context
from queues.board.lists.reads import (
    BANDS,
    BY_KEY,
    COLUMN_LABELS,
    STATES,
    count_calls,
    counts_from,
    list_page,
    pipelined,
    rows_of,
    tabs_of,
)
from queues.board.readonly import get_queue_by_index
from queues.jobs import read as jobread
from queues.templatetags.queues_lists import callable_of, list_state


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
        "tabs": tabs_of(queue_index, counts, spec.key),
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
    counts = counts_from(queue, pipelined(queue.connection, count_calls(queue)))  # 1
    try:
        query = paging.query_of(request, default_order="newest" if spec.registry else "oldest")
    except paging.BadFilter as error:
        return _bad_filter(request, queue, queue_index, spec, counts, error)
    listed = list_page(request, queue, spec, counts, query)  # 2 (and 3 with a filter)
    rows = rows_of(queue, spec, listed.entries) if listed.entries else []  # 3 (4)
    page = listed.page
    can_act = request.queue_access.can_act
    context = {
        **panel_context(request),
        "title": f"{spec.label} jobs in {queue.name}",
        "queue": queue,
        "queue_index": queue_index,
        "state": spec,
        "tabs": tabs_of(queue_index, counts, state),
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
