"""The panel's door to the operator service (``queues.operator``): one job from its page, the bulk actions
of the lists (by selection, or every job of a queue in one state: ``select_across``), the cancel of a job.
What each action does, who may, the audit row and the answer are the service's; here: the confirmation
pages (GET), the service's call (POST), and its answer in the panel's words.

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

The queue-wide actions ("Empty queue", "Delete All" and "Requeue All" failed jobs) are the service's
too; their panel doors are ``queue_actions``.

Corrupt jobs (``jobread``: not UTF-8, no ``data``, garbage, a key of the wrong type, an undeclared
queue) never stop an action: a delete deletes their keys (DEL of the hash and of the list/registry
entry: the operator wants them gone), a requeue refuses them one by one and reports them
("Requeued 2 jobs." plus "1 of 3 jobs not requeued: <id>: corrupt ..."); "Requeue All" leaves them
in the failed registry and says how many it skipped. A corrupt job's own page and its one-job actions are
``corrupt.respond``'s (``lookups.known``, by the view's name).
"""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from queues.board.access import panel_context
from queues.board.readonly import get_queue_by_index  # poison-proof ids and counts
from queues.exceptions import QueueUnavailable
from queues.jobs import read as jobread
from queues.operator import actions as operator
from queues.operator import jobs as operator_jobs
from queues.templatetags.queues_panel import panel_state

# --- one job, from its page: GET asks, POST acts ------------------------------------------------

# What the confirmation page (GET) of a one-job action says it does; the POST does it.
CONFIRMED = {
    "delete": "Its hash and results are deleted and its id taken off its queue and registries: this cannot be undone.",
    "stop": "The worker running it kills its work horse: the job ends stopped, and is not retried.",
    "enqueue": "The job goes back to the tail of its queue and runs again with its arguments.",
    "requeue": "The failed job goes back to the tail of its queue with a full set of attempts.",
}
DONE = {"delete": "deleted", "stop": "stopped", "enqueue": "enqueued", "requeue": "requeued"}


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
    """GET: the confirmation page. POST: ``action`` on the job through the service (audited, its dead-letter row
    following it); then the job's page (the queue's jobs after a delete) with a message."""
    queue = get_queue_by_index(queue_index)
    job = jobread.fetch(job_id, queue.connection)
    if job is None or jobread.is_corrupt(job):  # gone (or made corrupt) since ``lookups.known`` read it
        raise Http404(f"No job {job_id!r} in Redis (deleted, expired, or never there).")
    if request.method != "POST":
        return confirm(request, queue, queue_index, job, action)
    result = operator.one(request, action, job_id, confirmed=True, queue=queue, reason="from the panel")
    if result.data.get("unavailable"):
        raise _unavailable(result)
    if not result.ok:
        messages.error(request, f"Job {job.id} not {DONE[action]}: {result.detail}.")
        return redirect("django_rq:job_detail", queue_index, job_id)
    messages.info(request, f"You have successfully {DONE[action]} {job.id}")
    if action == "delete":
        return redirect("django_rq:jobs", queue_index)
    return redirect("django_rq:job_detail", queue_index, job_id)


def _unavailable(result):
    """The Redis error of a one-job action (audited by the service) as the guard's 503."""
    return QueueUnavailable(result.detail)


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


def bulk_actions(request, queue_index):
    """django-rq's ``actions`` view (delete / requeue / stop / cancel of the selected jobs), job by job through
    the service: each job's own answer reported and audited (one row per job), a missing or failing one never
    stopping the others, never a 500.

    With ``select_across=1`` and ``state=<queued|started|deferred|scheduled|finished|failed|canceled>`` (and
    an optional ``func=<text>``, part of the function path), the selection is every job of the queue in that
    state, walked in chunks of 500 ids with pipelines (``operator.jobs.select``), each chunk deleted or
    requeued in a few round trips (``operator.jobs.run_many``), and one audit row per chunk names its ids and
    counts."""
    action = request.POST.get("action", "") if request.method == "POST" else ""
    if action in BULK_VERBS and request.POST.get("select_across") == "1":
        return _select_across(request, queue_index, action)
    job_ids = list(dict.fromkeys(request.POST.getlist("job_ids"))) if action in BULK_VERBS else []
    if not job_ids:
        return redirect(_safe_next_url(request, queue_index))  # nothing to do: back (as django-rq did)
    queue = get_queue_by_index(queue_index)
    # Redis failing before anything is done: the panel answers 503 (access.guard). Later, per job.
    outcome = operator.perform(
        request, action, job_ids, confirmed=True, queue=queue, reason=f"bulk {action} of {len(job_ids)} from the panel"
    )
    _report(request, action, outcome.results, len(job_ids))
    return redirect(_safe_next_url(request, queue_index))


def _select_across(request, queue_index, action):
    """Every job of the queue in ``state`` (matching ``func``), chunk by chunk through the service."""
    state, func = request.POST.get("state", ""), request.POST.get("func", "")
    try:
        operator_jobs.check_selection(state, func)
    except operator_jobs.InvalidSelection as exc:
        messages.error(request, f"Nothing {BULK_VERBS[action]}: {exc}")
        return redirect(_safe_next_url(request, queue_index))
    queue = get_queue_by_index(queue_index)
    chunks = operator_jobs.select(queue, state, func)
    total = sum(len(chunk) for chunk in chunks)
    where = f"state={state}" + (f", func containing {func!r}" if func else "")
    results = []
    for chunk in chunks:

        def one_row(outcome, chunk=chunk):
            detail = f"bulk {action} of all {total} jobs in {where} from the panel: {operator.counted(outcome)}"
            not_done = [f"{r.target}: {r}" for r in outcome.not_done[:10]]
            if not_done:
                detail += "; " + "; ".join(not_done)
            kinds = {r.audit_outcome for r in outcome.results}
            return queue.name, chunk, kinds.pop() if len(kinds) == 1 else "partial", detail

        results += operator.perform(request, action, chunk, confirmed=True, queue=queue, audit_as=one_row).results
    if not results:
        messages.info(request, f"No job of {queue.name} in {where}: nothing {BULK_VERBS[action]}.")
    _report(request, action, results, total)
    return redirect(_safe_next_url(request, queue_index))


def _report(request, action, results, total):
    done = sum(1 for r in results if r.ok)
    if done:
        messages.info(request, f"{BULK_VERBS[action].capitalize()} {done} job{'s' if done != 1 else ''}.")
    not_done = [r for r in results if not r.ok]
    if not_done:
        listed = "; ".join(f"{r.target}: {_said(action, r)}" for r in not_done[:10])
        more = f" (and {len(not_done) - 10} more)" if len(not_done) > 10 else ""
        messages.error(
            request,
            f"{len(not_done)} of {total} job{'s' if total != 1 else ''} not {BULK_VERBS[action]}: {listed}{more}.",
        )


def _said(action, result):
    """A bulk stop that found no running job says "not stopped: ..." (as django-rq's ``stop_jobs``)."""
    return f"not stopped: {result.detail}" if action == "stop" and result.kind == "changed" else result.detail


def _safe_next_url(request, queue_index):
    """django-rq's ``next_url``, only when it stays on this site (no open redirect)."""
    next_url = request.POST.get("next_url", "")
    if next_url and url_has_allowed_host_and_scheme(
        next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return next_url
    return reverse("django_rq:jobs", args=[queue_index])


def cancel(request, queue_index, job_id):
    """Cancel one queued or scheduled job from its page, through the service. GET: the bulk actions'
    confirmation page (queues/confirm_bulk.html), whose form posts to the bulk actions (one job, audited
    there); POST: cancel, audit, and back to the job's page with the answer."""
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
    result = operator.one(request, "cancel", job_id, confirmed=True, queue=queue, reason="from the panel's job page")
    if result.data.get("unavailable"):
        raise _unavailable(result)
    if result.ok:
        messages.info(request, f"Job {job_id} {result.detail}.")
    else:
        messages.error(request, f"Job {job_id} not canceled: {result.detail}.")
    return redirect(job_page)
