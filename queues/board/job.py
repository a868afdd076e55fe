"""The job page (``job_detail``) and the attempts on it (``result_detail`` answers with a redirect there).

The page shows a job as the API does: its state (``held``, not rq's ``rate_limited``), function and
arguments as escaped JSON text, ``meta`` as JSON, progress, its limit key (``_held.html``), its attempts
with their errors (rq's results stream, the last ``RESULTS_SHOWN``), the latest exception, its trace id
(the ``optima_trace`` field: ``OptimaJob.TRACE_FIELD``), the jobs it depends on and that depend on it
(``LINKED`` of each), its batch and chain (``batches.job_workflow``), and, with the act permission, the
actions (Cancel, Stop, Requeue, Enqueue, Delete: ``rq_actions``).

Redis round trips of one page, whatever the job holds (``tests/queues/board/test_job_page.py`` counts them):

| round trip | what |
| --- | --- |
| ``lookups.known`` | the job exists (404 otherwise; a corrupt one is ``corrupt.respond``'s page) |
| 1 | its hash, its results stream (``XREVRANGE``, at most ``RESULTS_SHOWN``), its dependents and dependencies sets |
| 2 (only if it has a limit key, a dependency or a dependent) | its key's hold (``limits.read_hold``), linked jobs |
| ``batches.job_workflow`` (a batch's member) | the batch (1); a chain's step: the chain (1), its steps' jobs (1) |

Nothing here writes, and nothing is unpickled (``jobread``: JSON only). A results stream, a dependents or
dependencies set of the wrong type reads as empty (reported once: ``entries.report``); a result entry rq
cannot read is left out (reported).

``result_detail`` (django-rq's page of one result) is folded into the page's Attempts: its URL redirects to
the attempt's anchor (``#result-<id>``) when the job still has that result, 404 otherwise.
"""

import json
import zlib

import redis
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from rq.job import Job
from rq.results import Result

from queues.board import batches, bounded
from queues.board.access import panel_context
from queues.board.readonly import get_queue_by_index, wrong_type
from queues.jobs import capped
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.jobs import results as jobresults
from queues.keyspace import entries, keys
from queues.producer import limits
from queues.templatetags.queues_panel import api_state

RESULTS_SHOWN = jobresults.RESULTS_READ  # rq keeps 10 results of a job: all of them
LINKED = 20  # dependencies / dependents shown with their function (the rest: a count)
ARG_CHARS = 2_000  # characters of one argument's JSON shown (then cut, saying so)


def _json(value, limit=ARG_CHARS):
    return entries.cut(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str), limit)


def _status(job):
    status = job.get_status(refresh=False)  # what the hash says: no second read
    return str(getattr(status, "value", status) or "")


def _members(key, reply):
    """The ids of a set read in the pipeline (``SMEMBERS``), sorted; a key of the wrong type reads as none."""
    if isinstance(reply, redis.ResponseError):
        return wrong_type(key, reply, [])
    if isinstance(reply, Exception):
        raise reply
    return sorted(entries.text(m) for m in reply)


def attempts(job, key, reply):
    """rq's ``Result`` of each entry of the job's results stream read in the pipeline (``XREVRANGE``: newest
    first), bounded as ``jobs/results.py`` reads them; an entry rq cannot restore is left out (reported)."""
    if isinstance(reply, redis.ResponseError):
        return wrong_type(key, reply, [])
    if isinstance(reply, Exception):
        raise reply
    found = []
    for result_id, payload in reply:
        result_id = entries.text(result_id)
        try:
            found.append(
                Result.restore(
                    job.id,
                    result_id,
                    jobresults._bounded(payload),  # the caps of results.read (exception text, return value)
                    connection=job.connection,
                    serializer=job.serializer,
                )
            )
        except Exception as exc:  # noqa: BLE001 — whatever the entry holds, it is not a result
            entries.report(key, f"entry {result_id} is not a result rq can read ({type(exc).__name__})")
    return found


def _exc_of(raw):
    """The failure text the job's hash keeps (``exc_info``, zlib), at most ``entries.TEXT_CHARS``."""
    data = raw.get(b"exc_info") if isinstance(raw, dict) else None
    if not data:
        return ""
    try:
        inflated, whole = entries.inflate(data, entries.TEXT_CHARS * 4)
    except zlib.error:
        inflated, whole = data[: entries.TEXT_CHARS * 4], len(data) <= entries.TEXT_CHARS * 4
    shown = inflated.decode("utf-8", "backslashreplace")
    return entries.cut(shown) if whole else shown[: entries.TEXT_CHARS] + " …(truncated)"


def trace_id(job):
    """The trace id of the job's enqueue (its ``optima_trace`` field: ``00-<trace id>-<span id>-<flags>``), or
    a ``trace_id`` its meta carries; "" when neither."""
    parts = (getattr(job, "trace", "") or "").split(" ")[0].split("-")
    if len(parts) == 4 and len(parts[1]) == 32 and all(c in "0123456789abcdef" for c in parts[1]):
        return parts[1]
    carried = (job.meta or {}).get("trace_id")
    return entries.cut(carried, 200) if isinstance(carried, str) else ""


def _func_of(found):
    if found is None:
        return None
    return found.func_name if not jobread.is_corrupt(found) else f"corrupt: {found.why}"


def read_page(connection, job_id):
    """Everything the page shows of ``job_id`` but its batch: a dict, or None when the job is gone."""
    job_id = jobread.normal_id(job_id)
    if not isinstance(job_id, str) or jobread.why_id(job_id):  # read as corrupt: ``lookups.known``'s page
        return {"job": jobread.fetch(job_id, connection)}
    job_key, results_key = jobread.job_key(job_id), keys.results_key(job_id)
    dependents_key, dependencies_key = Job.dependents_key_for(job_id), f"{job_key}:dependencies"
    with connection.pipeline(transaction=False) as pipe:
        capped.read_key(pipe, job_key)
        pipe.xrevrange(results_key, "+", "-", count=RESULTS_SHOWN)
        pipe.smembers(dependents_key)
        pipe.smembers(dependencies_key)
        raw, stream, dependents, dependencies = pipe.execute(raise_on_error=False)
    raw = capped.hash_of(raw)
    job = jobread.load(job_id, raw, connection)
    if job is None or jobread.is_corrupt(job):
        return {"job": job}
    dependents, dependencies = _members(dependents_key, dependents), _members(dependencies_key, dependencies)
    linked = [*dependencies[:LINKED], *dependents[:LINKED]]
    limited = limits.hold_key(job) is not None  # a concurrency, a rate, or both
    replies = []
    if linked or limited:
        with connection.pipeline(transaction=False) as pipe:
            if limited:
                limits.read_hold(pipe, job)
            for linked_id in linked:
                jobread.read_hash(pipe, linked_id)
            replies = pipe.execute(raise_on_error=False)
    hold = None
    if limited:
        hold = limits.hold_from(job, replies[: limits.HOLD_READS])
        replies = replies[limits.HOLD_READS :]
    funcs = [_func_of(jobread.load(i, r, connection, check_origin=False)) for i, r in zip(linked, replies)]
    done = attempts(job, results_key, stream)
    return {
        "job": job,
        "attempts": done,
        "hold": hold,
        "exc": _latest_failure(done) or _exc_of(raw),
        "dependencies": list(zip(dependencies[:LINKED], funcs[: len(dependencies[:LINKED])])),
        "dependents": list(zip(dependents[:LINKED], funcs[len(dependencies[:LINKED]) :])),
        "more_dependencies": max(len(dependencies) - LINKED, 0),
        "more_dependents": max(len(dependents) - LINKED, 0),
    }


def _latest_failure(done):
    """The exception text of the latest attempt when it failed (what rq's ``job.exc_info`` says), else ""."""
    if done and done[0].type == Result.Type.FAILED:
        return done[0].exc_string or ""
    return ""


def _attempt_rows(done):
    rows = []
    for result in done:
        value = result.return_value
        rows.append(
            {
                "result": result,
                "type": result.type.name,
                "return_value": "" if value is None else _json(value, entries.TEXT_CHARS),
            }
        )
    return rows


def workflow(connection, job):
    """The job's batch and chain (``batches.job_workflow``), read only when its meta names a batch."""
    if not (job.meta or {}).get(jobmeta.BATCH):
        return None
    return batches.job_workflow(connection, job)


@never_cache
def job_detail(request, queue_index, job_id):
    queue = get_queue_by_index(queue_index)
    connection = bounded.connection()  # the request's bounded client (short timeouts, a deadline)
    found = read_page(connection, job_id)
    job = found["job"]
    if job is None or jobread.is_corrupt(job):  # gone (or made corrupt) since ``lookups.known`` read it
        raise Http404(f"No job {job_id!r} in Redis (deleted, expired, or never there).")
    status = _status(job)
    hold = found["hold"]
    context = {
        **panel_context(request),
        "title": f"Job {job.id}",
        "queue": queue,
        "queue_index": queue_index,
        "job": job,
        "status": api_state(status) or "unknown",
        "rq_status": status,
        "hold": hold,
        "progress": (job.meta or {}).get("progress"),
        "args": [_json(arg) for arg in job.args],
        "kwargs": [(entries.text(k), _json(v)) for k, v in job.kwargs.items()],
        "meta": json.dumps(job.meta, indent=2, sort_keys=True, ensure_ascii=False, default=str) if job.meta else "",
        "attempts": _attempt_rows(found["attempts"]),
        "exc": found["exc"],
        "trace_id": trace_id(job),
        "dependencies": found["dependencies"],
        "dependents": found["dependents"],
        "more_dependencies": found["more_dependencies"],
        "more_dependents": found["more_dependents"],
        "wf": workflow(connection, job),
        "can_act": request.queue_access.can_act,
        "can_cancel": status in ("queued", "scheduled") or (hold is not None and hold.ahead is not None),
        "can_stop": status == "started",
        "can_requeue": status == "failed",
        "can_enqueue": status not in ("queued", "failed"),
    }
    return render(request, "queues/job.html", context)


@never_cache
def result_detail(request, queue_index, job_id, result_id):
    """django-rq's page of one result: now the attempt's row on the job page (its anchor), when the job's
    results stream still holds it; 404 otherwise."""
    key = keys.results_key(jobread.normal_id(job_id))
    try:
        found = bool(bounded.connection().xrange(key, result_id, result_id, count=1))
    except redis.ResponseError as exc:  # not a stream id, or a key of the wrong type
        found = "WRONGTYPE" in str(exc) and wrong_type(key, exc, False)
    if not found:
        raise Http404(f"Job {job_id!r} has no result {result_id!r} (rq keeps its last {RESULTS_SHOWN}).")
    return redirect(reverse("django_rq:job_detail", args=[queue_index, job_id]) + f"#result-{result_id}")
