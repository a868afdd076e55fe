"""The panel's actions on jobs, audited: one job from its page, and the bulk actions of the lists.

One job (``delete_job``, ``requeue_job``, ``enqueue_job``, ``stop_job``, at django-rq's URLs and names): its
GET is a confirmation page (``confirm``: ``queues/confirm_job_action.html``), its POST acts (the act
permission: ``urls.py``) and writes one audit row with the outcome: "ok", or "error" with why (Requeue of a job
that is not in the failed registry, Enqueue of a queued one, Stop of a job no worker runs). The bulk actions
(delete / requeue / stop / cancel of selected jobs) are ``bulk_actions``: job by job, each with its
own outcome, so ``[a, missing, b]`` deletes a and b and reports the missing one. Dead
letters follow the jobs: a failed job requeued from the panel marks its row ``retried``, a deleted
one ``discarded``; a job stopped from the panel dies with a row ``stopped`` ("stopped by an operator",
``failures/mirror.py``), not ``open``, which follows a later requeue or delete the same way. (A requeued
dead job gets a full set of attempts again: the worker's ``OptimaWorker.prepare_job_execution`` resets
them when it starts a job marked dead.) A job put back leaves the failed registry whatever its status
(``operations.requeue``): one stopped, then enqueued too.

The queue-wide actions ("Empty queue", "Delete All" and "Requeue All" failed jobs) are in
``queue_actions``.

Corrupt jobs (``jobread``: not UTF-8, no ``data``, garbage, a key of the wrong type, an undeclared
queue) never stop an action: a delete deletes their keys (DEL of the hash and of the list/registry
entry: the operator wants them gone), a requeue refuses them one by one and reports them
("Requeued 2 jobs." plus "1 of 3 jobs not requeued: <id>: corrupt ..."); "Requeue All" leaves them
in the failed registry and says how many it skipped. A corrupt job's own page and its one-job actions are
``corrupt.respond``'s (``lookups.known``, by the view's name).
"""

import redis
from django.contrib import messages
from django.db.models import F
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from rq.command import send_command
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.registry import FailedJobRegistry

from queues import audit, conf
from queues.board.access import panel_context
from queues.board.readonly import get_queue_by_index  # poison-proof ids and counts
from queues.exceptions import QueueUnavailable
from queues.failures.operations import lives_elsewhere, mark_dead_letters, requeue
from queues.jobs import read as jobread
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.producer.cancel import cancel_job
from queues.templatetags.queues_panel import panel_state


def _failed_ids(queue, job_ids):
    """The subset of ``job_ids`` in the queue's failed registry, in order."""
    registry = FailedJobRegistry(queue.name, queue.connection)
    with queue.connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.zscore(registry.key, jobread.normal_id(job_id))
        scores = pipe.execute(raise_on_error=False)  # a registry key of the wrong type: in none
    return [j for j, s in zip(job_ids, scores) if s is not None and not isinstance(s, Exception)]


def audit_outcome(response):
    """The audit outcome of a view's response (``queue_actions``)."""
    return "ok" if response.status_code < 400 else "error"


def _mark_rows_of(action, failed_ids):
    """After a successful requeue/enqueue/delete of jobs that were in the failed registry, their
    dead-letter rows follow at once (no wait for the reconcile)."""
    if not failed_ids:
        return
    if action in ("requeue", "enqueue"):
        mark_rows(failed_ids, DeadLetter.Status.RETRIED, retried_as_self=True)
    elif action == "delete":
        mark_rows(failed_ids, DeadLetter.Status.DISCARDED)


def mark_rows(job_ids, status, retried_as_self=False):
    """``operations.mark_dead_letters`` (the open rows of ``job_ids`` -> ``status``), and the rows ``stopped``
    too: a job stopped from the panel has one (not ``open``: ``mirror.opened_as``), which follows its job."""
    job_ids = list(job_ids)
    mark_dead_letters(job_ids, status, retried_as_self=retried_as_self)
    updates = {
        "status": status,
        "updated_at": timezone.now(),
        **({"retried_as": F("job_id")} if retried_as_self else {}),
    }
    for start in range(0, len(job_ids), 500):
        DeadLetter.objects.filter(
            prefix=conf.prefix(), job_id__in=job_ids[start : start + 500], status=DeadLetter.Status.STOPPED
        ).update(**updates)


# --- one job, from its page: GET asks, POST acts ------------------------------------------------

# What the confirmation page (GET) of a one-job action says it does; the POST does it.
CONFIRMED = {
    "delete": "Its hash and results are deleted and its id taken off its queue and registries: this cannot be undone.",
    "stop": "The worker running it kills its work horse: the job ends stopped, and is not retried.",
    "enqueue": "The job goes back to the tail of its queue and runs again with its arguments.",
    "requeue": "The failed job goes back to the tail of its queue with a full set of attempts.",
}
DONE = {"delete": "deleted", "stop": "stopped", "enqueue": "enqueued", "requeue": "requeued"}


def send_stop(queue, job):
    """rq's stop-job command to the worker running ``job`` (rq's ``send_stop_job_command`` without its own read of
    the job, which unpickles nothing but reads it again): (True, "stop sent"), or (False, why) when none runs it."""
    worker_name = None if job is None or jobread.is_corrupt(job) else job.worker_name
    if not worker_name:
        return False, "the job is not running"
    send_command(queue.connection, worker_name, "stop-job", job_id=job.id)
    return True, "stop sent"


def _delete(queue, job, in_failed):
    with queue.connection.pipeline() as pipe:  # whichever priority band holds it
        for key in keys.band_keys(queue.key):
            pipe.lrem(key, 0, job.id)
        pipe.execute()
    job.delete()
    return True, "deleted"


def _requeue(queue, job, in_failed):
    if not in_failed:
        return False, f"it is not in the failed jobs of {queue.name} (it is {panel_state(job)})"
    requeue(queue, job, in_failed=True)
    return True, "requeued"


def _enqueue(queue, job, in_failed):
    status = job.get_status(refresh=False)
    if not in_failed and str(getattr(status, "value", status)) == "queued":
        return False, "it is queued already"
    requeue(queue, job, in_failed)  # one in the failed registry (stopped from the panel) leaves it
    return True, "enqueued"


ACT = {"delete": _delete, "requeue": _requeue, "enqueue": _enqueue, "stop": lambda queue, job, _: send_stop(queue, job)}


def confirm(request, queue, queue_index, job, action):
    """The page asking to confirm ``action`` on one job; its form posts to the same URL."""
    return render(
        request,
        "queues/confirm_job_action.html",
        {
            **panel_context(request),
            "queue_index": queue_index,
            "queue": queue,
            "job": job,
            "state": panel_state(job),
            "action": action,
            "what": CONFIRMED[action],
            "title": "Are you sure?",
        },
    )


def one_job(request, queue_index, job_id, action):
    """GET: the confirmation page. POST: ``action`` on the job, audited with its outcome, its dead-letter row
    following it (``_mark_rows_of``); then the job's page (the queue's jobs after a delete) with a message."""
    queue = get_queue_by_index(queue_index)
    job = jobread.fetch(job_id, queue.connection)
    if job is None or jobread.is_corrupt(job):  # gone (or made corrupt) since ``lookups.known`` read it
        raise Http404(f"No job {job_id!r} in Redis (deleted, expired, or never there).")
    if request.method != "POST":
        return confirm(request, queue, queue_index, job, action)
    failed = _failed_ids(queue, [job_id])
    try:
        ok, detail = ACT[action](queue, job, bool(failed))
    except Exception as exc:
        audit.record(request, action, queue.name, [job_id], "error", f"{type(exc).__name__}: {exc}")
        raise
    if ok:
        _mark_rows_of(action, failed)
    audit.record(request, action, queue.name, [job_id], "ok" if ok else "error", f"from the panel: {detail}")
    if not ok:
        messages.error(request, f"Job {job.id} not {DONE[action]}: {detail}.")
        return redirect("django_rq:job_detail", queue_index, job_id)
    messages.info(request, f"You have successfully {DONE[action]} {job.id}")
    if action == "delete":
        return redirect("django_rq:jobs", queue_index)
    return redirect("django_rq:job_detail", queue_index, job_id)


# Each its own function: ``lookups.known`` hands a corrupt job's URL to ``corrupt.respond`` by the view's name.
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def delete_job(request, queue_index, job_id):
    return one_job(request, queue_index, job_id, "delete")


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def requeue_job(request, queue_index, job_id):
    return one_job(request, queue_index, job_id, "requeue")


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def enqueue_job(request, queue_index, job_id):
    return one_job(request, queue_index, job_id, "enqueue")


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def stop_job(request, queue_index, job_id):
    return one_job(request, queue_index, job_id, "stop")


# --- bulk actions: each job on its own ---------------------------------------------------------

BULK_VERBS = {"delete": "deleted", "requeue": "requeued", "stop": "stopped", "cancel": "canceled"}


def _act_on_one(queue, action, job_id, in_failed=False):
    """Apply ``action`` to one job (``in_failed``: listed failed); returns (outcome, detail). Never raises:
    a missing job, an invalid operation or a Redis error is this job's own outcome, and the others go on."""
    try:
        if action == "stop":
            try:
                stopped, detail = send_stop(queue, jobread.fetch(job_id, queue.connection))
            except Exception:  # noqa: BLE001 — as django-rq's stop_jobs: any failure is "not stopped"
                stopped, detail = False, "the job is not running"
            return ("ok", detail) if stopped else ("error", f"not stopped: {detail}")
        if action == "cancel":
            canceled = cancel_job(job_id, queue.connection)
            return ("ok" if canceled.ok else "error"), canceled.detail
        job = jobread.fetch(job_id, queue.connection)
        if job is None:
            raise NoSuchJobError(job_id)
        if jobread.is_corrupt(job):
            return _act_on_corrupt(queue, action, job)
        if action == "delete" and in_failed and (kept := lives_elsewhere(job, queue.name)):
            queue.connection.zrem(keys.failed_key(queue.name), job.id)  # issue 32: the job is not this queue's
            return "ok", f"taken off the failed list; job kept: {kept}"
        if action == "delete":
            with queue.connection.pipeline() as pipe:  # whichever priority band holds it
                for key in keys.band_keys(queue.key):
                    pipe.lrem(key, 0, job.id)
                pipe.execute()
            job.delete()
            return "ok", "deleted"
        requeue(queue, job, in_failed)
        return "ok", "requeued"
    except NoSuchJobError:
        return "error", f"no job {job_id!r} in Redis (deleted or expired)"
    except (InvalidJobOperation, redis.RedisError, QueueUnavailable) as exc:
        return "error", f"{type(exc).__name__}: {exc}"


def _act_on_corrupt(queue, action, job):
    if action == "delete":
        jobread.raw_delete(queue.connection, queue.name, job.raw_id)
        return "ok", f"deleted (corrupt: {job.why})"
    return "error", f"corrupt, not requeued ({job.why}): delete it, or inspect it on its page"


def bulk_actions(request, queue_index):
    """django-rq's ``actions`` view (delete / requeue / stop of the selected jobs), job by job.

    Each job's own outcome is reported, audited (one row per job) and, for the jobs that were in
    the failed registry and succeeded, mirrored to their dead-letter rows; a missing job or a
    failing one never stops the others, and the answer is never a 500."""
    action = request.POST.get("action", "") if request.method == "POST" else ""
    job_ids = list(dict.fromkeys(request.POST.getlist("job_ids"))) if action in BULK_VERBS else []
    if not job_ids:
        return redirect(_safe_next_url(request, queue_index))  # nothing to do: back (as django-rq did)
    queue = get_queue_by_index(queue_index)
    # Redis failing here: nothing done yet, the panel answers 503 (access.guard). Later, per job.
    failed = set(_failed_ids(queue, job_ids))
    results = [(job_id, *_act_on_one(queue, action, job_id, job_id in failed)) for job_id in job_ids]
    done = [job_id for job_id, outcome, _ in results if outcome == "ok"]
    _mark_rows_of(action, [job_id for job_id in done if job_id in failed])
    for job_id, outcome, detail in results:
        audit.record(
            request, action, queue.name, [job_id], outcome, f"bulk {action} of {len(job_ids)} from the panel: {detail}"
        )
    _report(request, action, results)
    return redirect(_safe_next_url(request, queue_index))


def _report(request, action, results):
    done = sum(1 for _, outcome, _ in results if outcome == "ok")
    if done:
        messages.info(request, f"{BULK_VERBS[action].capitalize()} {done} job{'s' if done != 1 else ''}.")
    not_done = [(job_id, detail) for job_id, outcome, detail in results if outcome != "ok"]
    if not_done:
        listed = "; ".join(f"{job_id}: {detail}" for job_id, detail in not_done[:10])
        more = f" (and {len(not_done) - 10} more)" if len(not_done) > 10 else ""
        messages.error(
            request,
            f"{len(not_done)} of {len(results)} job{'s' if len(results) != 1 else ''} "
            f"not {BULK_VERBS[action]}: {listed}{more}.",
        )


def _safe_next_url(request, queue_index):
    """django-rq's ``next_url``, only when it stays on this site (no open redirect)."""
    next_url = request.POST.get("next_url", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return next_url
    return reverse("django_rq:jobs", args=[queue_index])


def cancel(request, queue_index, job_id):
    """Cancel one queued or scheduled job (``queues.producer.cancel.cancel_job``) from its page. GET: the bulk
    actions' confirmation page (queues/confirm_bulk.html), whose form posts to the bulk actions (one job,
    audited there); POST: cancel, audit, and back to the job's page with the outcome."""
    queue = get_queue_by_index(queue_index)
    job_page = reverse("django_rq:job_detail", args=[queue_index, job_id])
    if request.method != "POST":
        job = jobread.fetch(job_id, queue.connection)
        return render(
            request,
            "queues/confirm_bulk.html",
            {
                **panel_context(request),
                "queue_index": queue_index,
                "action": "cancel",
                "job_ids": [job_id],
                "rows": [{"id": job_id, "job": job}],
                "queue": queue,
                "next_url": job_page,
            },
        )
    try:
        canceled = cancel_job(job_id, queue.connection)
    except Exception as exc:
        audit.record(request, "cancel", queue.name, [job_id], "error", f"{type(exc).__name__}: {exc}")
        raise
    audit.record(
        request,
        "cancel",
        queue.name,
        [job_id],
        "ok" if canceled.ok else "error",
        f"from the panel's job page: {canceled.detail}",
    )
    if canceled.ok:
        messages.info(request, f"Job {job_id} {canceled.detail}.")
    else:
        messages.error(request, f"Job {job_id} not canceled: {canceled.detail}.")
    return redirect(job_page)
