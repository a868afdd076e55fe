"""The confirmation of a list's bulk action (``queues/confirm_bulk.html``): the selected jobs, or "all N jobs
in <state>".
"""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache

from queues.board import paging
from queues.board.access import panel_context
from queues.board.lists.reads import (
    BY_KEY,
    MAX_SELECTED,
    SCAN_LIMIT,
    count_calls,
    counts_from,
    functions_of,
    pipelined,
    window_ids,
)
from queues.board.readonly import get_queue_by_index
from queues.jobs import read as jobread

# A function filter's count on the confirmation page is exact up to this many jobs in the state (read
# ``SCAN_LIMIT`` at a time: ten round trips at most); past it, a lower bound the page says is one.
COUNT_LIMIT = 5 * SCAN_LIMIT


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
    round trip; with a filter, exact up to ``COUNT_LIMIT`` jobs in the state: ``_count_matching``), and a
    form POSTing ``select_across=1``, ``state``, ``func`` and the action to ``django_rq:actions``, which walks
    the state itself. A state, action or filter it cannot use:
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
    counts = counts_from(queue, pipelined(queue.connection, count_calls(queue)))  # 1
    count, exact = counts[state], True
    if func:
        count, exact = _count_matching(queue, spec, counts, func)
    context = {
        **panel_context(request),
        "title": "Are you sure?",
        "queue": queue,
        "queue_index": queue_index,
        "action": action,
        "across": {"state": spec, "func": func, "count": count, "exact": exact, "total": counts[state]},
        "scan_limit": COUNT_LIMIT,
        "next_url": next_url,
    }
    return render(request, "queues/confirm_bulk.html", context)


def _count_matching(queue, spec, counts, func):
    """How many jobs of ``spec``'s state have a function path containing ``func`` -> (count, exact): read
    ``SCAN_LIMIT`` at a time (two round trips each: the ids, then their functions), newest first, up to
    ``COUNT_LIMIT`` jobs. Exact when the state holds no more than that; else a lower bound, which the page
    says (the action itself walks every job of the state, however many: ``operator.jobs.select``)."""
    total = counts[spec.key]
    query = paging.Query("newest", func)
    count = 0
    for offset in range(0, min(total, COUNT_LIMIT), SCAN_LIMIT):
        candidates = window_ids(queue, spec, counts, offset, min(SCAN_LIMIT, COUNT_LIMIT - offset), True)
        if not candidates:
            break
        count += sum(1 for function in functions_of(queue.connection, candidates) if query.matches(function))
    return count, total <= COUNT_LIMIT
