"""The queue-wide actions of the panel, audited: "Empty queue", "Delete All" and "Requeue All" failed jobs.

Two queue-wide views are replaced rather than wrapped, for the 200,000-job case: django-rq's
"Delete All" failed jobs loads every job at once with rq's default (pickle) serializer, and its
"Requeue All" makes three round trips per job. Ours walk the failed registry in chunks of
``CHUNK`` ids with pipelines, with the JSON job class. Their GET is our confirmation page
(``queues/confirm_queue_action.html``: one count, one round trip).

Their permission and confirmation are the operator service's (``queues.operator.actions.check``, the
``QUEUE_WIDE`` entries of its table): the same rule as every other action, checked before anything is read.

A corrupt job never stops them: "Delete All" deletes its keys, "Requeue All" leaves it in the failed
registry and says how many it skipped (rq_actions' docstring has the rule for every action).
"""

import redis
from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from rq.job import JobStatus
from rq.registry import FailedJobRegistry

from queues import audit, rqcompat
from queues.board.access import panel_context
from queues.board.readonly import get_queue_by_index, wrong_type  # poison-proof ids and counts
from queues.board.rq_actions import audit_outcome, mark_rows
from queues.failures.operations import lives_elsewhere
from queues.jobs import read as jobread
from queues.models import DeadLetter
from queues.operator import actions as operator

CHUNK = 500
CRUMBS = {"empty": "Empty", "requeue": "Requeue All", "delete": "Delete All"}


def _confirm(request, queue_index, kind):
    """The GET of a queue-wide action: "Are you sure?", with the number of jobs it acts on."""
    queue = get_queue_by_index(queue_index)
    total = queue.failed_job_registry.get_job_count() if kind != "empty" else None
    context = {
        **panel_context(request),
        "title": "Are you sure?",
        "queue": queue,
        "queue_index": queue_index,
        "kind": kind,
        "crumb": CRUMBS[kind],
        "total_jobs": total,
    }
    return render(request, "queues/confirm_queue_action.html", context)


def _refused(request, name):
    """403 when the operator service refuses ``name`` to this request (the guard has already checked the act
    permission: this holds the rule in one place), else None."""
    why = operator.check(request, name, confirmed=True)
    return render(request, "queues/denied.html", {"reason": "act", "why": why}, status=403) if why else None


def _empty(request, queue, queue_index):
    """rq's ``empty`` of every band (the queue's Lua: each job and its results deleted)."""
    queue.empty()
    messages.info(request, f"You have successfully cleared the queue {queue.name}")
    return redirect("django_rq:jobs", queue_index)


@never_cache
def empty_queue(request, queue_index):
    """ "Empty queue", audited with the count and the first ids of what it removes."""
    if request.method != "POST":
        return _confirm(request, queue_index, "empty")
    if refusal := _refused(request, "empty"):
        return refusal
    queue = get_queue_by_index(queue_index)
    count = queue.count
    first_ids = queue.get_job_ids(0, audit.MAX_JOB_IDS - 1)
    kind = queue.connection.type(queue.key)
    if kind not in (b"list", b"none"):
        return _empty_wrong_type(request, queue, queue_index, jobread.text(kind))
    try:
        response = _empty(request, queue, queue_index)
    except Exception as exc:
        audit.record(request, "empty", queue.name, first_ids, "error", f"{type(exc).__name__}: {exc}")
        raise
    audit.record(request, "empty", queue.name, first_ids, audit_outcome(response), f"emptied {count} waiting jobs")
    return response


def _empty_wrong_type(request, queue, queue_index, kind):
    """ "Empty" of a queue whose key is not a list (planted): the key is deleted, which empties it."""
    queue.connection.delete(queue.key)
    detail = f"queue key {queue.key} was a {kind}, not a list: deleted"
    audit.record(request, "empty", queue.name, [], "ok", detail)
    messages.warning(request, f"Queue {queue.name} emptied: its {detail}.")
    return redirect("django_rq:jobs", queue_index)


def _failed_chunk(queue, offset):
    """Up to ``CHUNK`` ids of the failed registry from ``offset`` on, as Redis holds them (bytes)."""
    key = FailedJobRegistry(queue.name, queue.connection).key
    try:
        return queue.connection.zrange(key, offset, offset + CHUNK - 1)
    except redis.ResponseError as exc:
        return wrong_type(key, exc, [])


def _act_on_all_failed(request, queue, action, per_job, mark, verb, delete_corrupt):
    """Take every failed job of ``queue`` out of the failed registry in chunks, apply
    ``per_job(pipe, job)`` to each job Redis still has, ``mark(ids, found_ids)`` their dead-letter
    rows, and audit the whole as one ``action``. A corrupt job's keys are deleted when
    ``delete_corrupt``, else it stays in the registry (skipped over). Returns (jobs acted on, ids
    whose job was gone, ids of corrupt jobs)."""
    registry_key = FailedJobRegistry(queue.name, queue.connection).key
    touched, gone, corrupt = [], [], []

    def handle(raw_ids):
        jobs = jobread.fetch_many(raw_ids, queue.connection)
        with queue.connection.pipeline() as pipe:
            for raw, job in zip(raw_ids, jobs):
                if jobread.is_corrupt(job) and not delete_corrupt:
                    continue
                pipe.zrem(registry_key, raw)
                if jobread.is_corrupt(job):
                    jobread.delete_keys(pipe, raw)
                elif job is not None:
                    per_job(pipe, job)
            pipe.execute()
        ids = [jobread.text(r) for r in raw_ids]
        found = [i for i, job in zip(ids, jobs) if job is not None and not jobread.is_corrupt(job)]
        gone.extend(i for i, job in zip(ids, jobs) if job is None)
        corrupt.extend(i for i, job in zip(ids, jobs) if jobread.is_corrupt(job))
        mark(ids, found)
        if len(touched) < audit.MAX_JOB_IDS:
            touched.extend(ids[: audit.MAX_JOB_IDS - len(touched)])

    count, seen = 0, set()
    try:
        # Until the registry is empty, or holds only ids already handled (written back meanwhile).
        while (raw_ids := _failed_chunk(queue, 0 if delete_corrupt else len(corrupt))) and not seen >= set(raw_ids):
            raw_ids = [r for r in raw_ids if r not in seen]
            handle(raw_ids)
            seen.update(raw_ids)
            count += len(raw_ids)
    except Exception as exc:
        audit.record(request, action, queue.name, touched, "error", f"{type(exc).__name__}: {exc}")
        raise
    done = count - len(gone) - len(corrupt)
    detail = f"{verb} {done} failed jobs"
    if gone:
        detail += f"; {len(gone)} listed in the failed registry were no longer in Redis (taken off the registry)"
    if corrupt:
        detail += f"; {len(corrupt)} corrupt " + ("deleted" if delete_corrupt else "skipped (left in the registry)")
    audit.record(request, action, queue.name, touched, "ok", detail)
    return done, gone, corrupt


@never_cache
def delete_all_failed(request, queue_index):
    """Delete every failed job of a queue, in chunks (replaces django-rq's ``delete_failed_jobs``)."""
    if request.method != "POST":
        return _confirm(request, queue_index, "delete")
    if refusal := _refused(request, "delete_all_failed"):
        return refusal
    queue = get_queue_by_index(queue_index)

    def delete(pipe, job):
        if not lives_elsewhere(job, queue.name):  # else only off this failed registry (issue 32)
            job.delete(pipeline=pipe, remove_from_queue=False)

    # A job already gone from Redis is as deleted as it gets: its row is discarded too; so is a corrupt one.
    count, _, corrupt = _act_on_all_failed(
        request,
        queue,
        "delete_all_failed",
        delete,
        lambda ids, found: mark_rows(ids, DeadLetter.Status.DISCARDED),
        "deleted",
        delete_corrupt=True,
    )
    messages.info(request, f"You have successfully deleted {count} failed job{'s' if count != 1 else ''}.")
    if corrupt:
        messages.warning(
            request,
            f"{len(corrupt)} corrupt job{'s' if len(corrupt) != 1 else ''} deleted too "
            f"(unreadable as jobs: their keys were removed): {', '.join(corrupt[:10])}.",
        )
    return redirect("django_rq:home")


@never_cache
def requeue_all_failed(request, queue_index):
    """Requeue every failed job of a queue, in chunks (replaces django-rq's ``requeue_all``)."""
    if request.method != "POST":
        return _confirm(request, queue_index, "requeue")
    if refusal := _refused(request, "requeue_all"):
        return refusal
    queue = get_queue_by_index(queue_index)

    def requeue(pipe, job):
        job.started_at = job.ended_at = None
        rqcompat.clear_exc_info(job)
        job.set_status(JobStatus.QUEUED, pipeline=pipe)
        rqcompat.enqueue_prepared(queue, job, pipe)

    # Only the rows of jobs actually requeued become "retried"; a row whose job was gone stays open
    # (the dead-letter admin's Retry enqueues it anew from its stored arguments).
    count, gone, corrupt = _act_on_all_failed(
        request,
        queue,
        "requeue_all",
        requeue,
        lambda ids, found: mark_rows(found, DeadLetter.Status.RETRIED, retried_as_self=True),
        "requeued",
        delete_corrupt=False,
    )
    messages.info(request, f"You have successfully requeued {count} job{'s' if count != 1 else ''}!")
    if corrupt:
        messages.warning(
            request,
            f"{len(corrupt)} corrupt skipped (unreadable as jobs, left in the failed list; "
            f"open or delete them there): {', '.join(corrupt[:10])}.",
        )
    if gone:
        messages.warning(
            request,
            f"{len(gone)} failed job{'s' if len(gone) != 1 else ''} no longer in Redis "
            "could not be requeued; retry their dead letters from the dead-letter admin.",
        )
    return redirect("django_rq:jobs", queue_index)
