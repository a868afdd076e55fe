"""The panel's Batches pages (issue 34, section 4): the list of open and recent batches, a batch's page
(its state and counts, callbacks, members by state, Cancel), and a job's batch and chain on its page.

- ``batches`` (``admin/queues/batches/``): one page of ``<p>:optima:batch-index`` (``queues/workflows/index.py``),
  newest first, ``PAGE`` batches a page, each read in the same round trip (its hash and its sets' sizes); an
  entry whose batch expired is dropped from the index. A warning names the registered workers that do not
  count batch members (an older release: docs/workflows.md).
- ``batch`` (``admin/queues/batches/<id>/``): the batch, its callbacks (fired or not) and one page of its
  members in one state (``?state=pending|finished|dead|canceled&cursor=N``: an SSCAN of its set, so a batch
  of 100,000 members costs one page). A succeeded batch's sets are dropped (its counts are frozen): no
  member lists then. An unknown or malformed id: 404.
- ``cancel`` (``admin/queues/batches/<id>/cancel/``, the act permission): GET confirms, POST runs
  the operator service's ``cancel_batch`` (``queues.operator``), which audits.
- ``job_workflow``: a job's batch and, for a chain's step, the chain's state, for the job page
  (queues/board/job.py; templates/queues/_job_workflow.html).

Reads go through the panel's bounded client; a key of the wrong type is reported once and left out (a
WRONGTYPE never answers 503). Every text shown (descriptions are user text) is escaped by the templates.
"""

import re
from urllib.parse import urlencode

import redis
from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from django_rq.settings import get_queues_map

from queues.board import bounded, readers
from queues.board.access import panel_context
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.operator import actions as operator
from queues.workflows import chains
from queues.workflows.batches import SETS
from queues.workflows.state import from_hash

PAGE = 25  # batches a page of the list
MAX_START = 1_000_000  # the index holds at most index.MAX_ENTRIES
MEMBERS_PAGE = 50  # member ids asked of one SSCAN (a hint: a small set answers whole)
MEMBER_STATES = ("pending", "finished", "dead", "canceled")
SET_OF = {"pending": "members", "finished": "done", "dead": "dead", "canceled": "canceled"}
BATCH_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,200}")  # the ids ``queues.batch()`` makes (and any safe one)


# --- reading --------------------------------------------------------------------------------------------


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _wrong_type(reply, key, instead):
    """A pipeline reply, or ``instead`` for a key of the wrong type (reported once); other errors raised."""
    if isinstance(reply, redis.ResponseError) and "WRONGTYPE" in str(reply):
        entries.report(key, "not of the type the Batches pages read (WRONGTYPE): left out")
        return instead
    if isinstance(reply, Exception):
        raise reply
    return reply


def _int(value):
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _parse(batch_id, found, counts):
    """(``BatchState``, its hash's fields) from the hash and the sizes of its ``SETS``, read as
    ``queues.batch_state`` reads them, through the panel's client."""
    members, done, dead, _adders, canceled = counts
    return from_hash(batch_id, found, (members, done, dead, canceled))


def read(connection, batch_ids):
    """{id: (BatchState, fields)} of the batches ``batch_ids`` whose hash exists, in one round trip."""
    if not batch_ids:
        return {}
    with connection.pipeline(transaction=False) as pipe:
        for batch_id in batch_ids:
            pipe.hgetall(keys.batch_key(batch_id))
            for part in SETS:
                pipe.scard(keys.batch_key(batch_id, part))
        replies = pipe.execute(raise_on_error=False)
    step = 1 + len(SETS)
    found = {}
    for i, batch_id in enumerate(batch_ids):
        hash_, *counts = replies[i * step : (i + 1) * step]
        hash_ = _wrong_type(hash_, keys.batch_key(batch_id), {})
        counts = [_wrong_type(c, keys.batch_key(batch_id, part), 0) for c, part in zip(counts, SETS, strict=True)]
        if hash_:
            found[batch_id] = _parse(batch_id, hash_, counts)
    return found


def listed(connection, start, count):
    """One page of the index, newest first: ([(BatchState, fields)], how many entries the index holds). An
    entry whose batch's hash is gone (expired) is dropped from the index and left out of the page."""
    key = keys.batch_index_key()
    with connection.pipeline(transaction=False) as pipe:
        pipe.zcard(key)
        pipe.zrevrange(key, start, start + count - 1)
        total, raw = pipe.execute(raise_on_error=False)
    total, raw = _wrong_type(total, key, 0), _wrong_type(raw, key, [])
    ids = [_text(i) for i in raw]
    found = read(connection, ids)
    gone = [batch_id for batch_id in ids if batch_id not in found]
    if gone:
        connection.zrem(key, *gone)
    return [found[batch_id] for batch_id in ids if batch_id in found], max(int(total) - len(gone), 0)


def members(connection, batch_id, which, cursor):
    """One page of the batch's members in the state ``which`` (``MEMBER_STATES``): (sorted ids, the cursor of
    the next page, 0 at the end). ``pending``: members neither done nor dead (canceled ones left the set)."""
    key = keys.batch_key(batch_id, SET_OF[which])
    try:
        cursor, raw = connection.sscan(key, cursor, count=MEMBERS_PAGE)
    except redis.ResponseError as exc:
        _wrong_type(exc, key, None)
        return [], 0
    ids = sorted(_text(i) for i in raw)
    if which == "pending" and ids:
        with connection.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.sismember(keys.batch_key(batch_id, "done"), job_id)
                pipe.sismember(keys.batch_key(batch_id, "dead"), job_id)
            replies = [r is True or r == 1 for r in pipe.execute(raise_on_error=False)]
        ids = [job_id for i, job_id in enumerate(ids) if not (replies[2 * i] or replies[2 * i + 1])]
    return ids, int(cursor)


def job_links(connection, job_ids):
    """[{id, status, url}] of ``job_ids``, in order: the job's rq status and its page (its queue read from its
    hash, one round trip); a job whose hash is gone has the status ``gone`` and no page."""
    if not job_ids:
        return []
    with connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(jobread.job_key(job_id), "origin", "status")
        replies = pipe.execute(raise_on_error=False)
    return _links(job_ids, replies)


def _links(job_ids, replies):
    """``job_links`` of ``job_ids`` from the replies of their ``HMGET origin status``."""
    index = get_queues_map()
    links = []
    for job_id, reply in zip(job_ids, replies, strict=True):
        origin, status = ("", "") if isinstance(reply, Exception) else (_text(v or b"") for v in reply)
        url = ""
        if origin in index:
            url = reverse("django_rq:job_detail", args=[index[origin], jobread.shown_id(job_id)])
        links.append({"id": job_id, "status": status or "gone", "url": url})
    return links


def older_workers(connection):
    """The names of the registered workers that do not count batch members (not in ``batch-workers``): an
    older release, whose members' batches never complete. What ``queues.batch()`` logs (``batches.py``)."""
    registered = readers.worker_keys(connection)
    with connection.pipeline(transaction=False) as pipe:
        pipe.hkeys(keys.batch_workers_key())
        (counting,) = pipe.execute(raise_on_error=False)
    counting = {_text(k) for k in _wrong_type(counting, keys.batch_workers_key(), [])}
    return sorted(key.rpartition(":")[2] for key in set(registered) - counting)


def _progress(batch):
    """{"step", "of"} for ``queues/_progress.html``: members counted (finished or dead) of the total."""
    return {"step": batch.finished + batch.dead, "of": batch.total} if batch.total else None


# --- pages ----------------------------------------------------------------------------------------------


def _known(batch_id):
    """The batch's (BatchState, fields), or 404 for a malformed or unknown (expired) id."""
    if not BATCH_ID_RE.fullmatch(batch_id):
        raise Http404(f"{batch_id[:80]!r} is not a batch id.")
    found = read(bounded.connection(), [batch_id]).get(batch_id)
    if found is None:
        raise Http404(f"No batch {batch_id!r} (unknown, or expired after it ended).")
    return found


@never_cache
def batches(request):
    """Open and recent batches, newest first, ``PAGE`` a page (``?start=N``)."""
    raw = request.GET.get("start", "0") or "0"
    start = int(raw) if raw.isdigit() and len(raw) <= 7 else -1
    if not 0 <= start <= MAX_START:
        return render(
            request,
            "queues/batches.html",
            {
                **panel_context(request),
                "title": "Batches",
                "error": f"start must be a whole number from 0 to {MAX_START:,}, got {raw[:40]!r}.",
                "rows": [],
                "older_workers": [],
            },
            status=400,
        )
    connection = bounded.connection()
    found, total = listed(connection, start, PAGE)
    rows = [
        {
            "batch": batch,
            "progress": _progress(batch),
            "chain": fields.get("chain", ""),
            "url": reverse("django_rq:queues_batch", args=[batch.id]),
        }
        for batch, fields in found
    ]
    context = {
        **panel_context(request),
        "title": "Batches",
        "error": "",
        "rows": rows,
        "total": total,
        "first": start + 1,
        "last": start + len(rows),
        "previous_url": "?" + urlencode({"start": max(start - PAGE, 0)}) if start > 0 else "",
        "next_url": "?" + urlencode({"start": start + PAGE}) if start + PAGE < total else "",
        "older_workers": older_workers(connection),
    }
    return render(request, "queues/batches.html", context)


@never_cache
def batch(request, batch_id):
    """A batch: state and counts, callbacks, one page of its members in one state, Cancel."""
    found, fields = _known(batch_id)
    which = request.GET.get("state", "pending")
    if which not in MEMBER_STATES:
        which = "pending"
    raw = request.GET.get("cursor", "0") or "0"
    cursor = int(raw) if raw.isdigit() and len(raw) <= 20 else 0
    cursor = cursor if cursor < 2**64 else 0  # SSCAN's cursor is an unsigned 64-bit number: start over
    connection = bounded.connection()
    dropped = "total" in fields  # succeeded: the sets are gone, the counts frozen
    ids, next_cursor = ([], 0) if dropped else members(connection, batch_id, which, cursor)
    callbacks = job_links(connection, list(found.callbacks.values()))
    context = {
        **panel_context(request),
        "title": f"Batch {batch_id}",
        "b": found,
        "progress": _progress(found),
        "chain": fields.get("chain", ""),
        "chain_step": _int(fields.get("step")) + 1 if fields.get("chain") else None,
        "callbacks": [
            {"kind": kind, "fired": found.fired.get(kind, ""), **link}
            for kind, link in zip(found.callbacks, callbacks, strict=True)
        ],
        "which": which,
        "tabs": [{"state": s, "count": getattr(found, s), "url": "?" + urlencode({"state": s})} for s in MEMBER_STATES],
        "dropped": dropped,
        "members": job_links(connection, ids),
        "next_url": "?" + urlencode({"state": which, "cursor": next_cursor}) if next_cursor else "",
        "can_act": request.queue_access.can_act,
        "can_cancel": found.state in ("open", "running"),
    }
    return render(request, "queues/batch.html", context)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def cancel(request, batch_id):
    """GET: the confirmation page; POST: the operator service's ``cancel_batch`` (audited), then back to the
    batch's page with its outcome."""
    found, _fields = _known(batch_id)
    page = reverse("django_rq:queues_batch", args=[batch_id])
    if request.method != "POST":
        context = {**panel_context(request), "title": "Are you sure?", "b": found, "batch_url": page}
        return render(request, "queues/confirm_batch_cancel.html", context)
    if found.state == "canceled":  # cancel_batch answers ``canceled`` (ok) again: no second audit row saying so
        messages.error(request, f"Batch {batch_id} not canceled: it has already canceled.")
        return redirect(page)
    result = operator.one(request, "cancel_batch", batch_id, confirmed=True, reason="from the panel")
    canceled, running = result.data.get("canceled", []), result.data.get("running", [])
    if result.ok:
        messages.success(
            request,
            f"Batch {batch_id} canceled: {len(canceled)} waiting member(s) canceled, "
            f"{len(running)} running left to finish; no callback fires.",
        )
    else:
        messages.error(request, f"Batch {batch_id} not canceled: it has already {result.state}.")
    return redirect(page)


# --- the job page ---------------------------------------------------------------------------------------


def job_workflow(connection, job):
    """The batch and chain of ``job`` (the job the page read, or its id) for its page, or None when its meta names
    no batch. At most 3 round trips on ``connection`` (the panel's bounded client), whatever the chain holds: the
    batch (hash and set sizes); the chain's hash; its current step's batch state and dead set with the status and
    queue of every step's jobs (``MEMBERS_PAGE`` a step) in one pipeline. (One more, and 1 before them when given
    an id, only for a dead job of the current step that is not among its jobs.)"""
    if isinstance(job, str | bytes):
        job = jobread.fetch(job, connection)
    if job is None or jobread.is_corrupt(job):
        return None
    batch_id = (job.meta or {}).get(jobmeta.BATCH)
    if not isinstance(batch_id, str) or not BATCH_ID_RE.fullmatch(batch_id):
        return None
    found = read(connection, [batch_id]).get(batch_id)
    shown = {"batch_id": batch_id, "batch": None, "url": "", "chain": None, "chain_id": ""}
    if found is None:
        return shown  # expired: its id only
    state, fields = found
    shown.update(batch=state, progress=_progress(state), url=reverse("django_rq:queues_batch", args=[batch_id]))
    chain_id = fields.get("chain", "")
    if chain_id:
        shown["chain_id"] = chain_id
        chain = _chain(connection, chain_id)
        if chain is not None:
            chain, links = chain
            shown["chain"] = chain
            shown["steps"] = [
                {
                    "step": step,
                    "number": step.index + 1,
                    "batch_url": reverse("django_rq:queues_batch", args=[step.batch_id]) if step.batch_id else "",
                    "jobs": [links[j] for j in step.job_ids[:MEMBERS_PAGE]],
                    "waiting_on": [links[j] for j in step.waiting_on[:MEMBERS_PAGE]],
                }
                for step in chain.steps
            ]
    return shown


def _chain(connection, chain_id):
    """(``ChainState``, {job id: link} of every job its steps show) of ``chain_id`` as ``queues.chain_state``
    reads it, in 2 round trips on the panel's client (3 when a dead job is not among its step's jobs); None
    for an unknown (expired) chain or a hash of the wrong type."""
    key = keys.chain_key(chain_id)
    try:
        found = connection.hgetall(key)
    except redis.ResponseError as exc:
        return _wrong_type(exc, key, None)
    if not found:
        return None
    fields = chains.chain_fields(found)
    batch_id = chains.current_batch(fields)
    shown = list(dict.fromkeys(j for ids in chains.step_jobs(fields) for j in ids[:MEMBERS_PAGE]))
    with connection.pipeline(transaction=False) as pipe:
        if batch_id:
            pipe.hget(keys.batch_key(batch_id), "state")
            pipe.smembers(keys.batch_key(batch_id, "dead"))
        for job_id in shown:
            pipe.hmget(jobread.job_key(job_id), "origin", "status")
        replies = pipe.execute(raise_on_error=False)
    batch_state, dead = "", []
    if batch_id:
        state, members, *replies = replies
        batch_state = _text(_wrong_type(state, keys.batch_key(batch_id), b"") or b"")
        dead = [_text(j) for j in _wrong_type(members, keys.batch_key(batch_id, "dead"), set())]
    chain = chains.chain_from_fields(chain_id, fields, batch_state, dead)
    links = dict(zip(shown, _links(shown, replies), strict=True))
    missing = [j for step in chain.steps for j in step.waiting_on[:MEMBERS_PAGE] if j not in links]
    links.update(zip(missing, job_links(connection, missing), strict=True))
    return chain, links
