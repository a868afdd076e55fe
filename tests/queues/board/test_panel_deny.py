"""The queue panel denies by default, and serves only its own pages.

- One table (``queues/board/urls.py`` ``PAGES``) is the URLconf: every page read or act, every view ours;
  the paths django-rq 4.2 served (operators' bookmarks) open our page of the same URL name.
- Any method but GET/HEAD needs the act permission, on every panel URL: the crawl POSTs (and PUTs,
  PATCHes, DELETEs, OPTIONs) to every one of them as a staff user who may only view, with jobs in
  several states in Redis: 403 each, and no key under the prefix changed.
"""

import hashlib
from pathlib import Path

import pytest
from django.test import Client
from django.urls import Resolver404, resolve, reverse

import queues
from queues import conf
from queues.board import urls as board_urls
from queues.board.urls import ACT, PAGES, READ
from tests.support.panel import dead_job, finished_job, make_staff, registered_worker

pytestmark = pytest.mark.django_db

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, orders-sync 2, repricer 3.
CHANGING_METHODS = ("post", "put", "patch", "delete", "options")


# --- one table is the URLconf; every view is ours; django-rq 4.2's bookmarks still open a page --------------


def test_every_mounted_view_is_guarded_as_its_classification_says():
    needs = {name: needs for _, _, name, needs in PAGES}
    mounted = {p.name: p.callback.queue_guard["act"] for p in board_urls.urlpatterns}
    assert mounted == {name: n == ACT for name, n in needs.items()}
    assert set(needs.values()) == {READ, ACT}


def _unwrapped(view):
    while hasattr(view, "__wrapped__"):
        view = view.__wrapped__
    return view


def test_no_view_or_template_of_django_rq_is_served():
    foreign = sorted(
        f"{p.name}: {_unwrapped(p.callback).__module__}"
        for p in board_urls.urlpatterns
        if not _unwrapped(p.callback).__module__.startswith("queues.board.")
    )
    assert foreign == []
    assert not (Path(queues.__file__).parent / "templates" / "django_rq").exists()


# The paths of django-rq 4.2.0's pages (django_rq/urls.py), as operators bookmarked them: each opens our page of
# the same URL name. Gone on purpose (docs/operator.md): "metrics" (ours is /metrics) and rq's cron pages.
DJANGO_RQ_4_2 = {
    "": "home",
    "stats.json": "home_json",
    "stats.json/": "home_json",
    "stats.json/sometoken/": "home_json",
    "queues/1/": "jobs",
    "queues/1/details/": "queue_details",
    "queues/1/finished/": "finished_jobs",
    "queues/1/failed/": "failed_jobs",
    "queues/1/failed/clear/": "delete_failed_jobs",
    "queues/1/scheduled/": "scheduled_jobs",
    "queues/1/started/": "started_jobs",
    "queues/1/deferred/": "deferred_jobs",
    "queues/1/empty/": "clear",
    "queues/1/requeue-all/": "requeue_all",
    "queues/1/some-job/": "job_detail",
    "queues/1/some-job/results/1-0/": "result_detail",
    "queues/1/some-job/delete/": "delete_job",
    "queues/1/some-job/requeue/": "requeue_job",
    "queues/1/some-job/enqueue/": "enqueue_job",
    "queues/1/some-job/stop/": "stop_job",
    "queues/confirm-action/1/": "confirm_action",
    "queues/actions/1/": "actions",
    "workers/1/": "workers",
    "workers/1/rq:worker:w1/": "worker_details",
    "schedulers/1/": "scheduler_jobs",
}


@pytest.mark.parametrize("route", sorted(DJANGO_RQ_4_2))
def test_a_bookmarked_django_rq_path_opens_our_page_of_the_same_name(route):
    match = resolve(f"/admin/queues/{route}")
    assert (match.namespace, match.url_name) == ("django_rq", DJANGO_RQ_4_2[route])
    assert _unwrapped(match.func).__module__.startswith("queues.board.")


@pytest.mark.parametrize("route", ["metrics/", "cron-schedulers/0/s1/", "cron-schedulers/0/s1/jobs/c1/"])
def test_django_rqs_metrics_and_cron_pages_are_not_mounted(route):
    with pytest.raises(Resolver404):
        resolve(f"/admin/queues/{route}", urlconf=board_urls)  # the panel's own URLconf: nothing under it
    assert not any(p.name in {"metrics", "cron_scheduler_detail", "cron_job_detail"} for p in board_urls.urlpatterns)


# --- the crawl: every panel URL, every changing method, as a viewer -----------------------------


def snapshot(admin_redis):
    """{key: (TYPE, sha256 of DUMP)} of every key under the test prefix."""
    return {
        key: (admin_redis.type(key), hashlib.sha256(admin_redis.dump(key)).hexdigest())
        for key in admin_redis.scan_iter(match=f"{conf.prefix()}*", count=1000)
    }


def _kwarg_names(pattern):
    return set(getattr(pattern.pattern, "converters", {})) or set(pattern.pattern.regex.groupindex)


def panel_requests(jobs, failed_result_id, worker_key):
    """(path, data) of every URL of the panel's URLconf, each job URL once per job of ``jobs``."""
    job_ids = [job.id for job in jobs.values()]
    data = {
        "actions": {"action": "delete", "job_ids": job_ids},
        "confirm_action": {"action": "delete", "_selected_action": job_ids},
        "queues_periodic": {"schedule": "tick", "action": "pause"},
    }
    requests = []
    for pattern in board_urls.urlpatterns:
        names = _kwarg_names(pattern)
        for job in jobs.values() if "job_id" in names else [None]:
            result = job.latest_result() if job is not None else None
            sample = {
                "queue_index": DEFAULT,
                "scheduler_index": DEFAULT,
                "connection_index": 0,
                "job_id": job.id if job else "",
                "result_id": result.id if result else failed_result_id,
                "key": worker_key,
                "scheduler_name": "s1",
                "cron_job_name": "c1",
                "token": "t",
                "name": "default",
                "batch_id": "some-batch",
            }
            url = reverse(f"django_rq:{pattern.name}", kwargs={n: sample[n] for n in names})
            requests.append((pattern.name, url, data.get(pattern.name, {})))
    return requests


@pytest.fixture
def viewer_only(django_user_model, prod):
    client = Client(enforce_csrf_checks=False)
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    return client


def test_a_viewer_changing_anything_anywhere_in_the_panel_gets_403_and_redis_stays_as_it_was(
    viewer_only, queue_redis, admin_redis, django_capture_on_commit_callbacks
):
    import queues
    from queues.models import AuditEntry, DeadLetter

    with django_capture_on_commit_callbacks(execute=True):
        queued = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
        scheduled = queues.enqueue("default", "tests.jobs.sample.add", 3, 4, delay=3600)
    failed, _ = dead_job("default")
    jobs = {"queued": queued, "failed": failed, "finished": finished_job("default"), "scheduled": scheduled}
    worker_key = registered_worker(queue_redis)
    requests = panel_requests(jobs, failed.latest_result().id, worker_key)
    assert {name for name, _, _ in requests} == {p.name for p in board_urls.urlpatterns}
    # The viewer does see the panel: the refusals below are about acting.
    assert viewer_only.get(reverse("django_rq:home")).status_code == 200
    assert viewer_only.get(reverse("django_rq:job_detail", args=[DEFAULT, failed.id])).status_code == 200
    rows = list(DeadLetter.objects.values_list("pk", "status"))
    before = snapshot(admin_redis)

    answers = {
        (method, url): getattr(viewer_only, method)(url, data).status_code
        for method in CHANGING_METHODS
        for _, url, data in requests
    }

    assert {k: status for k, status in answers.items() if status != 403} == {}
    assert len(answers) == len(CHANGING_METHODS) * len(requests)
    assert snapshot(admin_redis) == before
    assert AuditEntry.objects.count() == 0
    assert list(DeadLetter.objects.values_list("pk", "status")) == rows
