"""The panel's periodic jobs page: every declared schedule with its last and next run, and its
pause/resume (``queues.periodic.schedules``).

A GET reads, in three round trips and without writing: the templates' scores in rq-scheduler's
sorted set (the next run) plus each schedule's last run id and the paused set, then the last runs'
job hashes as JSON (``jobread.fetch_many``: a poison hash is shown as corrupt, never unpickled).
A POST (the act permission, as any POST to the panel: ``access.guard``; CSRF) pauses or resumes one
schedule and writes one audit row.
"""
import datetime as dt

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from django_rq.settings import get_queues_map
from django_rq.views import each_context
from rq.utils import as_text

from queues import audit, keys

from queues.jobs import read as jobread

from queues.periodic import schedules
from queues.board import bounded

UTC = dt.timezone.utc


def _when(value):
    """A job's datetime (rq keeps naive UTC) as an aware UTC datetime, or None."""
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def rows(connection):
    """One dict per declared schedule, for the page (reads only)."""
    declared = schedules.declared_schedules()
    with connection.pipeline(transaction=False) as pipe:
        for schedule in declared:
            pipe.zscore(schedules.scheduled_jobs_key(), schedule.template_id)
            pipe.get(keys.schedule_last_key(schedule.id))
        pipe.smembers(keys.schedules_paused_key())
        replies = pipe.execute()
    paused = {as_text(m) for m in replies[-1]}
    last_ids = [as_text(r) if r is not None else None for r in replies[1:-1:2]]
    jobs = iter(jobread.fetch_many([j for j in last_ids if j], connection, check_origin=False))
    index = get_queues_map()
    result = []
    for schedule, score, last_id in zip(declared, replies[0:-1:2], last_ids):
        row = {"schedule": schedule, "paused": schedule.id in paused,
               "timing": f"cron {schedule.cron} (UTC)" if schedule.cron else f"every {schedule.interval} s",
               "missed": schedule.missed if isinstance(schedule.missed, str)
               else f"catch up (at most {schedule.missed['catch_up']})",
               "next_run": dt.datetime.fromtimestamp(float(score), UTC) if score is not None else None,
               "last": None}
        if last_id:
            job = next(jobs)
            last = {"id": last_id, "status": "gone (expired or deleted)", "started": None, "ended": None,
                    "duration": None, "url": ""}
            if job is not None:
                status = job.get_status(refresh=False)
                last["status"] = getattr(status, "value", status) or "?"  # rq's JobStatus, or "corrupt"
                last["started"], last["ended"] = _when(job.started_at), _when(job.ended_at)
                if last["started"] and last["ended"]:
                    last["duration"] = round((last["ended"] - last["started"]).total_seconds(), 3)
                if schedule.queue in index:
                    last["url"] = reverse("django_rq:job_detail", args=[index[schedule.queue], last_id])
            row["last"] = last
        result.append(row)
    return result


def _page(request):
    context = {**each_context(request), "title": "Periodic jobs", "rows": rows(bounded.connection()),
               "can_act": request.queue_access.can_act, "access": request.queue_access}
    return render(request, "queues/periodic.html", context)


def _toggle(request):
    schedule_id, action = request.POST.get("schedule", ""), request.POST.get("action", "")
    if action not in ("pause", "resume"):
        messages.error(request, f"Unknown action {action[:40]!r}: 'pause' or 'resume'.")
        return redirect("django_rq:queues_periodic")
    audit_action = f"{action}-schedule"
    try:
        schedule = schedules.set_paused(schedule_id, action == "pause", bounded.connection())
    except KeyError as exc:
        audit.record(request, audit_action, "", outcome="error", detail=exc.args[0])
        messages.error(request, exc.args[0])
        return redirect("django_rq:queues_periodic")
    audit.record(request, audit_action, schedule.queue, detail=f"periodic schedule {schedule.id} {action}d: "
                 + ("the scheduler skips its ticks" if action == "pause" else "its ticks run again"))
    messages.success(request, f"Periodic schedule {schedule.id} {'paused' if action == 'pause' else 'resumed'}.")
    return redirect("django_rq:queues_periodic")


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def periodic(request):
    """GET: the page. POST ``schedule``, ``action`` = pause|resume (the guard asks the act permission
    of any POST)."""
    if request.method == "POST":
        return _toggle(request)
    return _page(request)
