"""The panel's URLs: django-rq's dashboard, every view behind ``access.guard``, plus ours.

Mounted at ``admin/queues/`` (optima_site/urls.py) under django-rq's own namespace, so its
templates' links resolve unchanged. Views that change something need the act permission;
the queue-wide ones are replaced by chunked versions, the bulk actions by per-job ones (see
``rq_actions``). Every django-rq view checks its URL's ids first (``lookups.known``: 404, never
500) and runs with the panel's bounded Redis clients (``bounded``, installed here). django-rq's views
read JSON only and write nothing on a GET (``readonly``, installed here by ``patches``).
"""
from django.urls import URLPattern, path
from django_rq import stats_views
from django_rq import urls as rq_urls
from django_rq import views as rq_views

from queues.board import bounded, patches, periodic, rq_actions, views
from queues.board.access import guard
from queues.board.lookups import known

bounded.install()
patches.install()  # django-rq's views: JSON only, and a GET writes nothing (readonly.py, patches.py)

app_name = "django_rq"

# django-rq view -> what serves it here (all guarded; the first group needs the act permission).
_ACTING = {
    rq_views.delete_job: rq_actions.audited(rq_views.delete_job, "delete"),
    rq_views.requeue_job_view: rq_actions.audited(rq_views.requeue_job_view, "requeue"),
    rq_views.enqueue_job: rq_actions.audited(rq_views.enqueue_job, "enqueue"),
    rq_views.stop_job: rq_actions.audited(rq_views.stop_job, "stop"),
    rq_views.actions: rq_actions.bulk_actions,
    rq_views.confirm_action: rq_views.confirm_action,
    rq_views.clear_queue: rq_actions.empty_queue,
    rq_views.requeue_all: rq_actions.requeue_all_failed,
    rq_views.delete_failed_jobs: rq_actions.delete_all_failed,
}
_REPLACED = {stats_views.stats: views.home, rq_views.queue_details: views.queue_details}
# Queue-wide actions walk up to 200,000 jobs: no per-request Redis deadline (bounded.py).
_LONG_RUNNING = {rq_views.clear_queue, rq_views.requeue_all, rq_views.delete_failed_jobs}


def _serve(view):
    if view in _ACTING:
        return guard(known(_ACTING[view]), act=True, long_running=view in _LONG_RUNNING)
    return guard(known(_REPLACED.get(view, view)))


urlpatterns = [
    path("find/", views.find, name="queues_find"),
    # Periodic jobs: GET the page; POST pauses or resumes one schedule (act permission).
    path("periodic/", periodic.periodic, name="queues_periodic"),
    path("pause/<str:name>/", views.pause_queue, name="queues_pause"),
    path("resume/<str:name>/", views.resume_queue, name="queues_resume"),
    # Cancel a queued or scheduled job: GET confirms, POST cancels (rq_actions.cancel).
    path("queues/<int:queue_index>/<str:job_id>/cancel/", guard(known(rq_actions.cancel), act=True),
         name="queues_cancel"),
    # stats.json and django-rq's metrics: behind the same access as the pages (no bypass by token).
    *[URLPattern(p.pattern, guard(p.callback), p.default_args, p.name) for p in rq_urls.get_api_urlpatterns()],
    *rq_urls.get_admin_urlpatterns(view_wrapper=_serve),
]
