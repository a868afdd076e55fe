"""The panel's limits page: every limit key in use, per key its running jobs, held jobs, rate and next release,
and its pause/resume (issue 35, §2).

A GET reads in three pipelined round trips and writes nothing (``overview``: the rate keys and
rq's concurrency keys, a key of the wrong type left out). A POST (the act permission, as any POST to the panel:
``access.guard``; CSRF) pauses or resumes one key through the operator service (``pause_key``/``resume_key``:
one audit row each). Any key can be paused, with a rate or a concurrency only: its held jobs wait (those its
concurrency held move to the key's rate held set: ``rates.pause``), the rest of its queue runs.
"""

import datetime as dt
from dataclasses import dataclass

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rq.utils import as_text

from queues.board import bounded
from queues.board.access import panel_context
from queues.keyspace import keys
from queues.operator import actions
from queues.producer import limits, rates


@dataclass(frozen=True)
class KeyState:
    """One limit key, as the limits page shows it."""

    queue: str
    key: str
    rate: str  # "10/s", or "" for a key with a concurrency only
    concurrency: int | None
    running: int | None  # rq's slots in use (queued or running); None for a rate-only key (not tracked)
    held: int  # held by the rate and by the concurrency
    next_release: float | None  # unix time of the next token, when jobs wait for one
    paused: bool


def overview(connection, limit=500):
    """[KeyState] of every limit key (rate keys and rq's concurrency keys), paused and most held first,
    in three pipelined round trips."""
    with connection.pipeline(transaction=False) as pipe:
        pipe.zrange(rates.keys_key(), 0, -1)
        pipe.smembers(keys.limit_keys_key())
        sets = pipe.execute(raise_on_error=False)
    members = set()
    for found_set in sets:  # a set of the wrong type (planted) reads as empty: the page never fails on it
        if not isinstance(found_set, Exception):
            members |= {as_text(m) for m in found_set}
    members = sorted(m for m in members if limits.split(m)[1])[:limit]
    if not members:
        return []
    with connection.pipeline(transaction=False) as pipe:
        for m in members:
            pipe.hmget(rates.config_key(m), "count", "seconds", "paused", "concurrency")
            pipe.zcard(rates.held_key(m))
            pipe.zscore(rates.due_key(), m)
            pipe.hget(keys.limit_config_key(m), "concurrency")
            pipe.zcard(keys.limit_allowed_key(m))
            pipe.zcard(keys.limit_held_key(m))
        replies = pipe.execute(raise_on_error=False)
    found = []
    for i, m in enumerate(members):
        cfg, held, due, concurrency, in_use, rq_held = [
            None if isinstance(r, Exception) else r for r in replies[6 * i : 6 * i + 6]
        ]
        count, seconds, paused, kept = cfg or (None, None, None, None)
        concurrency = concurrency or kept  # a paused key's own, once rq dropped its hash (rates.pause)
        try:
            rate = str(rates.Rate(int(count), float(seconds))) if count and seconds else ""
            concurrency = int(as_text(concurrency)) if concurrency else None
        except ValueError:
            continue
        if not rate and concurrency is None:
            continue  # an idle rate key whose hash expired
        queue_name, limit_key = limits.split(m)
        found.append(
            KeyState(
                queue=queue_name,
                key=limit_key,
                rate=rate,
                concurrency=concurrency,
                running=int(in_use or 0) if concurrency is not None else None,
                held=int(held or 0) + int(rq_held or 0),
                next_release=float(due) if due is not None else None,
                paused=as_text(paused or b"") == "1",
            )
        )
    return sorted(found, key=lambda s: (not s.paused, -s.held, s.queue, s.key))


def rows(connection):
    """One dict per limit key, for the page (reads only)."""
    found = []
    for state in overview(connection):
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
