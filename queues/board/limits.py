"""The panel's limits page: every limit key in use, per key its running jobs, held jobs, rate and next release,
and its pause/resume (issue 35, §2).

A GET reads in two pipelined round trips and writes nothing (``queues.producer.rates.overview``: rate keys and
rq's concurrency keys, a key of the wrong type left out). A POST (the act permission, as any POST to the panel:
``access.guard``; CSRF) pauses or resumes one key through the operator service (``pause_key``/``resume_key``:
one audit row each). Only a key with a rate can be paused: its held jobs wait, the rest of its queue runs.
"""

import datetime as dt

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from queues.board import bounded
from queues.board.access import panel_context
from queues.operator import actions
from queues.producer import limits, rates


def rows(connection):
    """One dict per limit key, for the page (reads only)."""
    found = []
    for state in rates.overview(connection):
        found.append(
            {
                "state": state,
                "target": limits.scoped(state.queue, state.key),
                "next_release": None
                if state.next_release is None
                else dt.datetime.fromtimestamp(state.next_release, dt.UTC),
            }
        )
    return found


def _page(request):
    context = {
        **panel_context(request),
        "title": "Limit keys",
        "rows": rows(bounded.connection()),
        "can_act": request.queue_access.can_act,
        "access": request.queue_access,
    }
    return render(request, "queues/limits.html", context)


def _toggle(request):
    target, action = request.POST.get("key", ""), request.POST.get("action", "")
    if action not in ("pause_key", "resume_key") or ":" not in target:
        messages.error(request, f"Unknown action {action[:40]!r} or key {target[:80]!r}: 'pause_key' or 'resume_key'.")
        return redirect("django_rq:queues_limits")
    result = actions.one(request, action, target, reason="limits page")
    (messages.success if result.ok else messages.error)(request, result.detail)
    return redirect("django_rq:queues_limits")


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def limit_keys(request):
    """GET: the page. POST ``key`` ("<queue>:<limit key>"), ``action`` = pause_key|resume_key."""
    if request.method == "POST":
        return _toggle(request)
    return _page(request)
