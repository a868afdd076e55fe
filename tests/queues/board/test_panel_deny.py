"""The queue panel denies by default.

- Every URL of django-rq's URLconf is classified read or act (``queues/board/urls.py``); one that is
  not is not mounted (404), and the first test here fails naming it.
- Any method but GET/HEAD needs the act permission, on every panel URL: the crawl POSTs (and PUTs,
  PATCHes, DELETEs, OPTIONs) to every one of them as a staff user who may only view, with jobs in
  several states in Redis: 403 each, and no key under the prefix changed.
- A name the panel rebinds inside django-rq that the installed django-rq lacks stops the start-up,
  naming the module, the name and the version; none is skipped.
"""

import hashlib
from importlib.metadata import version

import django_rq.utils
import django_rq.views
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import Resolver404, URLResolver, path, reverse
from django.urls.resolvers import RegexPattern
from django_rq import urls as rq_urls

from queues import conf
from queues.board import patches, readonly
from queues.board import urls as board_urls
from queues.board.urls import ACT, DJANGO_RQ, OURS, READ
from tests.support.panel import dead_job, finished_job, make_staff, registered_worker

pytestmark = pytest.mark.django_db

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, orders-sync 2, repricer 3.
CHANGING_METHODS = ("post", "put", "patch", "delete", "options")


# --- every django-rq URL is classified; the classification is what is mounted ------------------


# Left out of the panel on purpose (issue 33): django-rq's Prometheus page (ours is /metrics) and rq's cron
# pages (this project runs rq-scheduler): not mounted, they answer the admin's 404.
REMOVED = {"metrics", "cron_scheduler_detail", "cron_job_detail"}


def test_every_url_of_django_rqs_urlconf_is_classified_read_or_act():
    unclassified = sorted(
        {f"{p.name} (/{p.pattern})" for p in rq_urls.urlpatterns if p.name not in DJANGO_RQ and p.name not in REMOVED}
    )
    assert unclassified == [], (
        f"django-rq {version('django-rq')} serves URLs that queues/board/urls.py DJANGO_RQ does not classify "
        f"(they answer 404 until it does: READ for a page that only reads, ACT for anything else): {unclassified}"
    )


def test_the_table_classifies_only_urls_django_rq_has():
    assert sorted(set(DJANGO_RQ) - {p.name for p in rq_urls.urlpatterns}) == []
    assert set(DJANGO_RQ.values()) == {READ, ACT}


def test_every_mounted_view_is_guarded_as_its_classification_says():
    needs = {**DJANGO_RQ, **{name: needs for _, _, name, needs in OURS}}
    mounted = {p.name: p.callback.queue_guard["act"] for p in board_urls.urlpatterns}
    assert mounted == {name: n == ACT for name, n in needs.items()}


def test_a_url_django_rq_adds_later_is_not_mounted_and_is_logged(monkeypatch, caplog):
    original = rq_urls.get_admin_urlpatterns

    def upgraded(*args, **kwargs):
        purge = path("purge/<int:queue_index>/", lambda request, queue_index: None, name="purge_queue")
        return [*original(*args, **kwargs), purge]

    monkeypatch.setattr(rq_urls, "get_admin_urlpatterns", upgraded)
    with caplog.at_level("WARNING", logger="queues.board"):
        mounted = board_urls.django_rq_patterns()
    assert "purge_queue" not in {p.name for p in mounted}
    assert {p.name for p in mounted} == set(DJANGO_RQ)
    assert [r.getMessage() for r in caplog.records if not any(f"'{name}'" in r.getMessage() for name in REMOVED)] == [
        "django-rq serves /purge/<int:queue_index>/ (URL name 'purge_queue'), which queues/board/urls.py "
        "does not classify as read or act: not mounted, it answers 404"
    ]
    with pytest.raises(Resolver404):
        URLResolver(RegexPattern(r"^"), mounted).resolve("purge/1/")


# --- rebinding names inside django-rq: all present, or no start ---------------------------------


def test_every_name_the_panel_rebinds_exists_in_the_installed_django_rq():
    assert patches.missing() == []


def test_rebinding_a_name_django_rq_no_longer_has_refuses_to_start_naming_it():
    table = {"django_rq.views": {"get_jobs": object()}, "django_rq.utils": {"get_statistics_v9": object()}}
    with pytest.raises(ImproperlyConfigured) as raised:
        patches.install(table)
    assert str(raised.value) == (
        f"The queue panel rebinds names inside django-rq's modules, and django-rq {version('django-rq')} has no "
        "django_rq.utils.get_statistics_v9. Its views would run unpatched (pickle, writes on a GET), so the panel "
        "refuses to start. Install the django-rq version of requirements.txt, or adapt "
        "queues/board/patches.py (REBIND) to this version."
    )
    # Refused before anything was rebound.
    assert django_rq.views.get_jobs is readonly.get_jobs
    assert not hasattr(django_rq.utils, "get_statistics_v9")


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
