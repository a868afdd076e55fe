"""A job's own pages when the job is corrupt (``jobread.CorruptJob``): shown, deletable, never requeued.

``lookups.known`` hands every view with a ``job_id`` whose job cannot be read over to ``respond``:

| request                                      | answer                                                    |
| -------------------------------------------- | --------------------------------------------------------- |
| GET of any job page (detail, results, delete | 200: "corrupt: <why>", the id and the raw hash escaped,   |
| and requeue confirmations)                   | a Delete button                                           |
| POST delete                                  | DEL of its hash and of its entries in its queue's list    |
|                                              | and registries; its dead letter ``discarded``; audited    |
| POST requeue / enqueue / stop                | refused with a message (nothing to run); audited "error"  |
"""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache

from queues import audit
from queues.board import bounded
from queues.board.access import panel_context
from queues.failures.operations import mark_dead_letters
from queues.jobs import read as jobread
from queues.models import DeadLetter

REFUSED = {"requeue_job": "requeued", "enqueue_job": "enqueued", "stop_job": "stopped"}  # rq_actions' views


@never_cache
def respond(request, view_name, queue_index, queue_name, job):
    if request.method == "POST" and view_name == "delete_job":
        return _delete(request, queue_index, queue_name, job)
    if request.method == "POST" and view_name in REFUSED:
        detail = f"Job {job.id} not {REFUSED[view_name]}: it is corrupt ({job.why}). Delete it, or inspect it first."
        audit.record(request, view_name.split("_")[0], queue_name, [job.id], "error", detail)
        messages.error(request, detail)
        return redirect("django_rq:job_detail", queue_index, job.id)
    context = {
        **panel_context(request),
        "job": job,
        "queue_index": queue_index,
        "queue_name": queue_name,
        "title": f"Corrupt job {job.id}",
        "can_act": request.queue_access.can_act,
    }
    return render(request, "queues/corrupt_job.html", context)


def _delete(request, queue_index, queue_name, job):
    deleted = jobread.raw_delete(bounded.connection(), queue_name, job.raw_id)
    mark_dead_letters([job.id], DeadLetter.Status.DISCARDED)
    detail = f"corrupt job deleted ({job.why})" if deleted else "corrupt job already gone"
    audit.record(request, "delete", queue_name, [job.id], "ok", f"from the panel: {detail}")
    messages.info(request, f"You have successfully deleted the corrupt job {job.id}.")
    return redirect("django_rq:jobs", queue_index)
