"""The panel's periodic jobs page: every schedule in force (declared, or edited or added in the admin:
``queues.periodic.stored``) with its last runs and next run (in its zone and in UTC), and its pause/resume
(``queues.periodic.schedules``).

A GET reads the admin's stored schedules (one query), then, in three round trips and without writing: the
templates' scores in rq-scheduler's sorted set (the next run) plus each schedule's last run id, its run
history (``periodic.history``) and the paused set, then the last runs'
job hashes as JSON (``jobread.fetch_many``: a poison hash is shown as corrupt, never unpickled). A
key of the wrong type, an absurd score or a last-run id rq rejects is shown as unknown or corrupt
(reported once), never a 500 or a 503.
A POST (the act permission, as any POST to the panel: ``access.guard``; CSRF) pauses or resumes one
schedule and writes one audit row.
"""

import datetime as dt
import math

import redis
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods
from django_rq.settings import get_queues_map

from queues import audit
from queues.board import bounded
from queues.board.access import panel_context
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.periodic import history, schedules, stored

UTC = dt.UTC


def _when(value):
    """A job's datetime (rq keeps naive UTC) as an aware UTC datetime, or None."""
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def rows(connection):
    """One dict per declared schedule, for the page (reads only). A key of the wrong type, an absurd
    score or a last-run id rq rejects is reported once (``entries.report``) and shown as unknown."""
    declared = stored.schedules_in_force()
    with connection.pipeline(transaction=False) as pipe:
        for schedule in declared:
            pipe.zscore(schedules.scheduled_jobs_key(), schedule.template_id)
            pipe.get(keys.schedule_last_key(schedule.id))
            pipe.lrange(keys.schedule_runs_key(schedule.id), 0, history.KEPT - 1)
        pipe.smembers(keys.schedules_paused_key())
        replies = pipe.execute(raise_on_error=False)
    paused = {jobread.text(m) for m in _readable(replies[-1], keys.schedules_paused_key(), set())}
    scores = [_readable(r, schedules.scheduled_jobs_key(), None) for r in replies[0:-1:3]]
    last_ids = [_readable(r, keys.schedule_last_key(s.id), None) for s, r in zip(declared, replies[1:-1:3])]
    run_lists = [
        history.parse(_readable(r, keys.schedule_runs_key(s.id), [])) for s, r in zip(declared, replies[2:-1:3])
    ]
    last_ids = [jobread.normal_id(r) if r is not None else None for r in last_ids]
    jobs = iter(jobread.fetch_many([j for j in last_ids if j], connection, check_origin=False))
    index = get_queues_map()
    result = []
    for schedule, score, last_id, runs in zip(declared, scores, last_ids, run_lists):
        row = {
            "schedule": schedule,
            "paused": schedule.id in paused,
            "disabled": not schedule.enabled,
            "edited": ("edited in the admin" if "over" in schedule.source else "added in the admin")
            if schedule.stored
            else "",
            "runs": runs,
            "timing": f"cron {schedule.cron} ({schedule.tz})" if schedule.cron else f"every {schedule.interval} s",
            "missed": schedule.missed
            if isinstance(schedule.missed, str)
            else f"catch up (at most {schedule.missed['catch_up']})",
            "next_run": _next_run(score, schedule),
            "last": None,
        }
        # formatted here: the template's date filter would turn an aware datetime back into TIME_ZONE
        row["next_run_local"] = (
            f"{row['next_run'].astimezone(schedule.zone):%Y-%m-%d %H:%M:%S}" if row["next_run"] else ""
        )
        if last_id:
            job = next(jobs)
            shown = jobread.shown_id(last_id)
            last = {
                "id": shown,
                "status": "gone (expired or deleted)",
                "started": None,
                "ended": None,
                "duration": None,
                "url": "",
            }
            if job is not None:
                status = job.get_status(refresh=False)
                last["status"] = getattr(status, "value", status) or "?"  # rq's JobStatus, or "corrupt"
                last["started"], last["ended"] = _when(job.started_at), _when(job.ended_at)
                if last["started"] and last["ended"]:
                    last["duration"] = round((last["ended"] - last["started"]).total_seconds(), 3)
                if schedule.queue in index:
                    last["url"] = reverse("django_rq:job_detail", args=[index[schedule.queue], shown])
            row["last"] = last
        result.append(row)
    return result


def _readable(reply, key, instead):
    """A pipeline reply, or ``instead`` for a key of the wrong type (reported); other errors raised."""
    if isinstance(reply, redis.ResponseError) and "WRONGTYPE" in str(reply):
        entries.report(key, "not of the type the periodic page reads (WRONGTYPE): shown as unknown")
        return instead
    if isinstance(reply, Exception):
        raise reply
    return reply


def _next_run(score, schedule):
    """The template's score as an aware UTC datetime; None for none or a score that is not a time."""
    if score is None:
        return None
    if not math.isfinite(score) or not 0 <= score < 2**40:
        entries.report(schedules.scheduled_jobs_key(), f"{schedule.template_id} has the score {score}, not a time")
        return None
    return dt.datetime.fromtimestamp(float(score), UTC)


def _page(request):
    context = {
        **panel_context(request),
        "title": "Periodic jobs",
        "rows": rows(bounded.connection()),
        "can_act": request.queue_access.can_act,
        "access": request.queue_access,
    }
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
    audit.record(
        request,
        audit_action,
        schedule.queue,
        detail=f"periodic schedule {schedule.id} {action}d: "
        + ("the scheduler skips its ticks" if action == "pause" else "its ticks run again"),
    )
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
