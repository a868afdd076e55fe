"""The panel's URLs: django-rq's URLconf and ours, denied by default, every view behind ``access.guard``.

Mounted at ``admin/queues/`` (optima_site/urls.py) under django-rq's own namespace, so its
templates' links resolve unchanged.

- ``DJANGO_RQ`` classifies every URL name of django-rq's URLconf: ``READ`` (the view permission)
  or ``ACT`` (the act permission, for the GET too: it is the confirmation page of a change). A
  django-rq URL it does not name is not mounted (404) and logged at start-up: a view that a
  django-rq upgrade adds is refused until somebody classifies it (``tests/queues/board/test_panel_deny.py``
  fails naming it).
- Whatever the classification, a request whose method is not GET or HEAD needs the act
  permission (``access.needs_act``, enforced by ``guard`` alone).
- Some django-rq views are served by ours (``SERVED_BY``: the dashboard, the queue page, the
  chunked queue-wide actions, the per-job bulk actions, the job page and the single-job actions, audited:
  see ``rq_actions``).
- Every view checks its URL's ids first (``lookups.known``: 404, never 500) and runs with the
  panel's bounded Redis clients; django-rq's views read JSON only and write nothing on a GET
  (``patches.install()``, here: it fails at start-up when django-rq lacks a name it rebinds).
"""

from django.urls import URLPattern, path
from django_rq import urls as rq_urls

from queues.board import batches, job, lists, patches, periodic, queue_actions, rq_actions, search, views, workers
from queues.board.access import guard
from queues.board.lookups import known
from queues.logsafe import get_logger

patches.install()

logger = get_logger("queues.board")

app_name = "django_rq"

READ, ACT = "read", "act"

# Every URL name of django-rq's URLconf (checked against 4.2.0) -> the permission it needs; not its
# "metrics" (Prometheus text: ours is /metrics) nor rq's cron pages (not run here): they answer 404.
DJANGO_RQ = {
    "home": READ,
    "home_json": READ,
    "jobs": READ,
    "queue_details": READ,
    "finished_jobs": READ,
    "failed_jobs": READ,
    "scheduled_jobs": READ,
    "started_jobs": READ,
    "deferred_jobs": READ,
    "job_detail": READ,
    "result_detail": READ,
    "workers": READ,
    "worker_details": READ,
    "scheduler_jobs": READ,
    "delete_job": ACT,
    "requeue_job": ACT,
    "enqueue_job": ACT,
    "stop_job": ACT,
    "confirm_action": ACT,
    "actions": ACT,
    "clear": ACT,
    "requeue_all": ACT,
    "delete_failed_jobs": ACT,
}
# django-rq URL name -> our view serving it (same URL arguments).
SERVED_BY = {
    # Home, workers, rq-scheduler's jobs, stats.json (issue 33, part "home").
    "home": views.home,
    "home_json": views.home_json,
    "workers": workers.workers,
    "worker_details": workers.worker_details,
    "scheduler_jobs": workers.scheduler_jobs,
    "actions": rq_actions.bulk_actions,
    "clear": queue_actions.empty_queue,
    "requeue_all": queue_actions.requeue_all_failed,
    "delete_failed_jobs": queue_actions.delete_all_failed,
    # lists (issue 33): the queue page, its job lists and the bulk confirmation (queues/board/lists.py).
    "queue_details": lists.queue_details,
    "jobs": lists.queued_jobs,
    "finished_jobs": lists.finished_jobs,
    "failed_jobs": lists.failed_jobs,
    "scheduled_jobs": lists.scheduled_jobs,
    "started_jobs": lists.started_jobs,
    "deferred_jobs": lists.deferred_jobs,
    "confirm_action": lists.confirm_bulk,
    # Helper "job" (issue 33): the job page, its attempts, and the one-job actions (GET asks, POST acts, audited).
    "job_detail": job.job_detail,
    "result_detail": job.result_detail,
    "delete_job": rq_actions.delete_job,
    "requeue_job": rq_actions.requeue_job,
    "enqueue_job": rq_actions.enqueue_job,
    "stop_job": rq_actions.stop_job,
}
# Queue-wide actions walk up to 200,000 jobs: no per-request Redis deadline (bounded.py).
LONG_RUNNING = {"clear", "requeue_all", "delete_failed_jobs", "queues_batch_cancel"}  # a batch: every member

# Ours: (route, view, URL name, the permission it needs).
OURS = [
    ("find/", views.find, "queues_find", READ),
    # Live jobs by function, queue and state, or a text in their id or arguments (queues/search/).
    ("search/", search.search, "queues_search", READ),
    # Periodic jobs: GET the page; POST pauses or resumes one schedule (a POST: act, by the guard).
    ("periodic/", periodic.periodic, "queues_periodic", READ),
    ("pause/<str:name>/", views.pause_queue, "queues_pause", ACT),
    ("resume/<str:name>/", views.resume_queue, "queues_resume", ACT),
    # rq's canceled jobs of a queue (django-rq has no page for them), beside its finished/failed lists.
    ("queues/<int:queue_index>/canceled/", lists.canceled_jobs, "queues_canceled", READ),
    # Cancel a queued or scheduled job: GET confirms, POST cancels.
    ("queues/<int:queue_index>/<str:job_id>/cancel/", rq_actions.cancel, "queues_cancel", ACT),
    # Batches (issue 34): the list, a batch's page, its Cancel (GET confirms, POST cancels: audited).
    ("batches/", batches.batches, "queues_batches", READ),
    ("batches/<str:batch_id>/", batches.batch, "queues_batch", READ),
    ("batches/<str:batch_id>/cancel/", batches.cancel, "queues_batch_cancel", ACT),
]


def served(name, view, needs):
    return guard(known(view), act=needs == ACT, long_running=name in LONG_RUNNING)


def _django_rq_view(pattern):
    if pattern.name in SERVED_BY:
        return SERVED_BY[pattern.name]
    return pattern.callback


def django_rq_patterns():
    """django-rq's patterns, classified ones only; the API ones (stats.json, metrics) included: they
    are behind the same access as the pages, no bypass by token."""
    mounted = []
    for pattern in [*rq_urls.get_api_urlpatterns(), *rq_urls.get_admin_urlpatterns()]:
        if pattern.name not in DJANGO_RQ:
            logger.warning(
                "django-rq serves /%s (URL name %r), which queues/board/urls.py does not classify "
                "as read or act: not mounted, it answers 404",
                pattern.pattern,
                pattern.name,
            )
            continue
        view = served(pattern.name, _django_rq_view(pattern), DJANGO_RQ[pattern.name])
        mounted.append(URLPattern(pattern.pattern, view, pattern.default_args, pattern.name))
    return mounted


urlpatterns = [
    *[path(route, served(name, view, needs), name=name) for route, view, name, needs in OURS],
    *django_rq_patterns(),
]
