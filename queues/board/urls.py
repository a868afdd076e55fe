"""The panel's URLs, every page ours, denied by default, every view behind ``access.guard``.

Mounted at ``admin/queues/`` (optima_site/urls.py). Namespace ``django_rq`` and the routes and URL names of
django-rq 4.2's pages: projects reverse these names (``{% url 'django_rq:home' %}``) and operators have
bookmarked these paths, and both keep working although no view or template of django-rq is served any more
(docs/decisions.md, "The panel is ours").

- ``PAGES`` is the whole URLconf: each route, its view, its name and what it needs, ``READ`` (the view
  permission) or ``ACT`` (the act permission, for the GET too: it is the confirmation page of a change).
  Nothing else is mounted; a path not in it answers 404.
- Whatever the classification, a request whose method is not GET or HEAD needs the act permission
  (``access.needs_act``, enforced by ``guard`` alone).
- Every view checks its URL's ids first (``lookups.known``: 404, never 500) and runs with the panel's bounded
  Redis clients (``bounded``); a GET writes nothing and unpickles nothing (``tests/queues/trust/test_no_pickle.py``).
- Gone from django-rq's URLconf: ``metrics`` (Prometheus text: ours is /metrics), rq's cron pages (this project
  runs rq-scheduler) and ``stats.json``'s API token (the JSON is behind the panel's access, as the pages are).
"""

from django.urls import path, re_path

from queues.board import batches, job, limits, lists, periodic, queue_actions, rq_actions, search, views, workers
from queues.board.access import guard
from queues.board.lookups import known

app_name = "django_rq"

READ, ACT = "read", "act"

Q = "queues/<int:queue_index>/"
JOB = Q + "<str:job_id>/"

# (route, view, URL name, the permission it needs); a route starting with ^ is a regular expression.
PAGES = [
    # The home page: queues and their counts by state, workers, pause, history (views.home); as JSON.
    ("", views.home, "home", READ),
    (r"^stats\.json/?$", views.home_json, "home_json", READ),
    (r"^stats\.json/(?P<token>\w+)?/?$", views.home_json, "home_json", READ),  # django-rq's token form, same access
    # A queue, and its jobs by state (lists.py).
    (Q + "details/", lists.queue_details, "queue_details", READ),
    (Q, lists.queued_jobs, "jobs", READ),
    (Q + "started/", lists.started_jobs, "started_jobs", READ),
    (Q + "deferred/", lists.deferred_jobs, "deferred_jobs", READ),
    (Q + "scheduled/", lists.scheduled_jobs, "scheduled_jobs", READ),
    (Q + "finished/", lists.finished_jobs, "finished_jobs", READ),
    (Q + "failed/", lists.failed_jobs, "failed_jobs", READ),
    (Q + "canceled/", lists.canceled_jobs, "queues_canceled", READ),
    # Queue-wide actions (queue_actions.py) and the bulk actions on selected jobs (lists.confirm_bulk asks,
    # rq_actions.bulk_actions acts, job by job, audited).
    (Q + "empty/", queue_actions.empty_queue, "clear", ACT),
    (Q + "requeue-all/", queue_actions.requeue_all_failed, "requeue_all", ACT),
    (Q + "failed/clear/", queue_actions.delete_all_failed, "delete_failed_jobs", ACT),
    ("queues/confirm-action/<int:queue_index>/", lists.confirm_bulk, "confirm_action", ACT),
    ("queues/actions/<int:queue_index>/", rq_actions.bulk_actions, "actions", ACT),
    # A job (job.py): its page, an attempt's result (a redirect to its row), and its actions: GET asks, POST acts.
    (JOB, job.job_detail, "job_detail", READ),
    (JOB + "results/<str:result_id>/", job.result_detail, "result_detail", READ),
    (JOB + "delete/", rq_actions.delete_job, "delete_job", ACT),
    (JOB + "requeue/", rq_actions.requeue_job, "requeue_job", ACT),
    (JOB + "enqueue/", rq_actions.enqueue_job, "enqueue_job", ACT),
    (JOB + "stop/", rq_actions.stop_job, "stop_job", ACT),
    (JOB + "cancel/", rq_actions.cancel, "queues_cancel", ACT),
    # Workers, and rq-scheduler's scheduled jobs (workers.py).
    ("workers/<int:queue_index>/", workers.workers, "workers", READ),
    ("workers/<int:queue_index>/<str:key>/", workers.worker_details, "worker_details", READ),
    ("schedulers/<int:scheduler_index>/", workers.scheduler_jobs, "scheduler_jobs", READ),
    # Find a job by id; live jobs by function, queue and state, or a text in their id or arguments (search/).
    ("find/", views.find, "queues_find", READ),
    ("search/", search.search, "queues_search", READ),
    # Periodic jobs: GET the page; POST pauses or resumes one schedule (a POST: act, by the guard).
    ("periodic/", periodic.periodic, "queues_periodic", READ),
    ("pause/<str:name>/", views.pause_queue, "queues_pause", ACT),
    ("resume/<str:name>/", views.resume_queue, "queues_resume", ACT),
    # Batches (issue 34): the list, a batch's page, its Cancel (GET confirms, POST cancels: audited).
    ("batches/", batches.batches, "queues_batches", READ),
    ("batches/<str:batch_id>/", batches.batch, "queues_batch", READ),
    ("batches/<str:batch_id>/cancel/", batches.cancel, "queues_batch_cancel", ACT),
    # Limit keys (issue 35): GET the page; POST pauses or resumes one key (a POST: act, by the guard; audited).
    ("limits/", limits.limit_keys, "queues_limits", READ),
]
# Queue-wide actions walk up to 200,000 jobs: no per-request Redis deadline (bounded.py).
LONG_RUNNING = {"clear", "requeue_all", "delete_failed_jobs", "queues_batch_cancel"}  # a batch: every member


def served(name, view, needs):
    return guard(known(view), act=needs == ACT, long_running=name in LONG_RUNNING)


urlpatterns = [
    (re_path if route.startswith("^") else path)(route, served(name, view, needs), name=name)
    for route, view, name, needs in PAGES
]
