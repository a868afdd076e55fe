"""The panel's doors to the queue-wide actions of the operator service: "Empty queue", "Delete All" and
"Requeue All" failed jobs (``queues/operator/queues_wide.py`` does them: one Lua call, or a walk of the failed
registry in chunks with pipelines, with the JSON job class; django-rq's views are replaced, not wrapped).

Their GET is our confirmation page (``queues/confirm_queue_action.html``: one count, one round trip); their
POST calls ``queues.operator.actions.perform`` (its permission check, confirmation rule and one audit row per
queue, the same as from code, the admin or the API), and turns its answer into the panel's messages. A Redis
error is audited by the service and answered 503 by the panel's guard.
"""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from queues.board.access import panel_context
from queues.board.readonly import get_queue_by_index  # poison-proof ids and counts
from queues.exceptions import QueueUnavailable
from queues.operator import actions as operator

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


def _perform(request, queue_index, name):
    """``name`` on the queue at ``queue_index`` through the service, confirmed (this is the POST of its
    confirmation page) -> (queue, Result), or (None, the 403 response) when the service refuses it."""
    queue = get_queue_by_index(queue_index)
    result = operator.one(request, name, queue.name, confirmed=True, queue=queue)
    if result.data.get("unavailable"):
        raise QueueUnavailable(result.detail)
    if not result.ok:
        return None, render(request, "queues/denied.html", {"reason": "act", "why": result.detail}, status=403)
    return queue, result


def _jobs(count):
    return f"{count} job{'s' if count != 1 else ''}"


@never_cache
def empty_queue(request, queue_index):
    """ "Empty queue": every band's waiting jobs and their results deleted (audited with the count and the
    first ids); a queue key of the wrong type (planted) is deleted, which empties it."""
    if request.method != "POST":
        return _confirm(request, queue_index, "empty")
    queue, result = _perform(request, queue_index, "empty")
    if queue is None:
        return result
    if result.data.get("wrong_type"):
        messages.warning(request, f"Queue {queue.name} emptied: its {result.detail}.")
    else:
        messages.info(request, f"You have successfully cleared the queue {queue.name}")
    return redirect("django_rq:jobs", queue_index)


@never_cache
def delete_all_failed(request, queue_index):
    """Delete every failed job of a queue, in chunks (replaces django-rq's ``delete_failed_jobs``)."""
    if request.method != "POST":
        return _confirm(request, queue_index, "delete")
    queue, result = _perform(request, queue_index, "delete_all_failed")
    if queue is None:
        return result
    count, corrupt = result.data["count"], result.data["corrupt"]
    messages.info(request, f"You have successfully deleted {count} failed job{'s' if count != 1 else ''}.")
    if corrupt:
        messages.warning(
            request,
            f"{_jobs(len(corrupt)).replace('job', 'corrupt job')} deleted too "
            f"(unreadable as jobs: their keys were removed): {', '.join(corrupt[:10])}.",
        )
    return redirect("django_rq:home")


@never_cache
def requeue_all_failed(request, queue_index):
    """Requeue every failed job of a queue, in chunks (replaces django-rq's ``requeue_all``)."""
    if request.method != "POST":
        return _confirm(request, queue_index, "requeue")
    queue, result = _perform(request, queue_index, "requeue_all")
    if queue is None:
        return result
    count, gone, corrupt = result.data["count"], result.data["gone"], result.data["corrupt"]
    messages.info(request, f"You have successfully requeued {_jobs(count)}!")
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
