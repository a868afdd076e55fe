"""The panel's Search page (``admin/queues/search/``): live jobs by function, queue and state, and by a
text in their id or arguments, across the declared queues and their registries (``queues.search_jobs``,
queues/search/). Read-only but for the search's own lazy drop of index entries whose job is gone."""

from urllib.parse import urlencode

import redis
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django_rq.settings import get_queues_map

from queues.board import bounded
from queues.board.access import panel_context
from queues.connection import servers
from queues.exceptions import UnknownQueue
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.search import find

FUNCTIONS_SHOWN = 200  # most recently enqueued functions offered in the form
SCAN_LIMIT = 2000  # jobs a page's text (or second criterion) is checked on: the panel's 100 ms at 200,000 jobs


@never_cache
def search(request):
    """The form and one page of results; "Next" continues where this page's scan stopped."""
    get = request.GET
    criteria = {
        "function": get.get("function", "").strip(),
        "queue": get.get("queue", "").strip(),
        "state": get.get("state", "").strip(),
        "text": get.get("q", "").strip(),
    }
    index = get_queues_map()
    functions = set()
    for server in servers.names():  # each server's recent functions; one that does not answer offers none
        try:
            functions.update(_functions(bounded.connection(server)))
        except redis.RedisError:
            continue
    context = {
        **panel_context(request),
        "title": "Search jobs",
        "criteria": criteria,
        "states": find.STATES,
        "queue_names": list(index),
        "functions": sorted(functions),
        "found": None,
        "error": "",
        "hits": [],
        "next_url": "",
        "scan_note": "",
        "scan_limit": f"{SCAN_LIMIT:,}",
    }
    try:
        start = _start(get.get("start", "0") or "0")
        found = find.search_jobs(  # each server on the request's bounded client of it (QUEUES_REDIS_SERVERS)
            **{k: v or None for k, v in criteria.items()},
            start=start,
            scan_limit=SCAN_LIMIT,
            connect=bounded.connection,
        )
    except (find.InvalidSearch, UnknownQueue) as exc:  # each names the criterion, its value and what it takes
        context["error"] = str(exc).strip('"')
        return render(request, "queues/search.html", context, status=400)
    context["found"] = found
    context["hits"] = [
        {
            "hit": hit,
            "url": reverse("django_rq:job_detail", args=[index[hit.queue], jobread.shown_id(hit.job_id)])
            if hit.queue in index
            else "",
        }
        for hit in found.hits
    ]
    if found.next_start is not None:
        query = {
            "q": criteria["text"],
            "function": criteria["function"],
            "queue": criteria["queue"],
            "state": criteria["state"],
            "start": found.next_start,
        }
        context["next_url"] = "?" + urlencode({k: v for k, v in query.items() if v != ""})
    # Counts of jobs that exist: an index entry whose job expired is scanned, said apart and dropped.
    context["live_total"] = found.total - found.gone - found.misplaced
    if not found.exact:
        dropped = found.gone + found.misplaced
        end = found.start + found.scanned
        matched = len(found.hits)
        context["scan_note"] = (
            f"Scanned {found.scanned - dropped:,} of {found.total - dropped:,} {found.source} (newest "
            f"first, positions {found.start + 1:,}-{end:,}): {matched:,} {'matches' if matched == 1 else 'match'}."
        )
        if found.gone:
            context["scan_note"] += (
                f" {found.gone:,} more {'entry' if found.gone == 1 else 'entries'} named a job that had expired "
                "(dropped from the index)."
            )
        if found.misplaced:
            context["scan_note"] += (
                f" {found.misplaced:,} more {'entry' if found.misplaced == 1 else 'entries'} named a job that does "
                "not belong to this list (dropped from the index)."
            )
        if found.next_start is not None and len(found.hits) < find.PAGE_SIZE:
            context["scan_note"] += " Refine the search, or load more to scan further."
    return render(request, "queues/search.html", context)


def _start(raw):
    """The ``start`` parameter as an int; ``InvalidSearch`` naming it, its value and its limit otherwise (a
    number too long for ``int``, over 4,300 digits, is out of range; ``search_jobs`` checks the rest)."""
    try:
        return int(raw)
    except ValueError:
        if raw.strip().isdigit():
            raise find.InvalidSearch(f"start must be at most {find.MAX_START:,}, got {raw[:40]!r}….") from None
        raise find.InvalidSearch(f"start must be a whole number, got {raw[:40]!r}.") from None


def _functions(connection):
    """The most recently enqueued functions (the index's list); a list key of another type reads as none."""
    with connection.pipeline(transaction=False) as pipe:
        pipe.zrevrange(keys.search_functions_key(), 0, FUNCTIONS_SHOWN - 1)
        (reply,) = pipe.execute(raise_on_error=False)
    if isinstance(reply, Exception):
        entries.report(keys.search_functions_key(), "is not a sorted set: no functions offered")
        return []
    return [jobread.text(f) for f in reply]
