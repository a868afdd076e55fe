"""Nothing the web reads from Redis runs code, and a GET of the panel changes nothing in Redis.

Someone with write access to the queues' Redis plants pickles whose ``__reduce__`` creates a file
(job data, meta, result, exception info; one job in the queue and in every registry, the started
one stale so rq's cleanup would load it). Then a staff operator with every permission opens every
URL of the panel (walked from the URLconf, not listed by hand), ``/metrics``, ``/healthz``, the
dead-letter admin and ``/jobs/<id>/``: no file appears, and no key under the prefix changed.
"""

import json

import pytest
from django.urls import reverse
from django.utils import timezone

from queues import conf
from queues.catalog.lookup import get_queue
from tests.support.pickles import DEFAULT, panel_urls, plant

pytestmark = pytest.mark.django_db


def snapshot(admin_redis):
    """{key: (type, dump, ttl in s)} of every key under the test prefix."""
    state = {}
    for key in admin_redis.scan_iter(match=f"{conf.prefix()}*", count=1000):
        state[key] = (admin_redis.type(key), admin_redis.dump(key), admin_redis.ttl(key))
    return state


def changed_keys(before, after):
    changed = set(before) ^ set(after)
    for key in set(before) & set(after):
        (type_a, dump_a, ttl_a), (type_b, dump_b, ttl_b) = before[key], after[key]
        # A TTL only counts down while the test runs; one that went up (or appeared) was written.
        if type_a != type_b or dump_a != dump_b or not (ttl_a - 60 <= ttl_b <= ttl_a):
            changed.add(key)
    return sorted(k.decode() for k in changed)


def test_no_get_of_the_panel_admin_metrics_or_job_api_unpickles_or_writes_to_redis(
    operator, queue_redis, admin_redis, tmp_path
):
    from queues.models import DeadLetter

    trap = tmp_path / "trap"
    trap.mkdir()
    ids, worker_key = plant(queue_redis, trap)
    row = DeadLetter.objects.create(
        prefix=conf.prefix(),
        queue="default",
        job_id=ids["failed"],
        func_path="tests.jobs.sample.add",
        args=[1, 2],
        kwargs={},
        exc_type="RuntimeError",
        exc_message="boom",
        traceback="Traceback",
        attempts_made=1,
        attempts_allowed=1,
        reason="exhausted",
        dead_at=timezone.now(),
    )
    sample = {
        "queue_index": DEFAULT,
        "scheduler_index": DEFAULT,
        "connection_index": 0,
        "job_id": ids["failed"],
        "result_id": "1-0",
        "key": worker_key,
        "scheduler_name": "s1",
        "cron_job_name": "c1",
        "token": "t",
        "name": "default",
    }
    urls = panel_urls(sample)
    assert len(urls) >= 28
    # Each planted job's detail page too (the walk fills in one job id).
    urls += [reverse("django_rq:job_detail", args=[DEFAULT, job_id]) for job_id in ids.values()]
    urls += [f"{url}?job_id={job_id}" for url in [reverse("django_rq:queues_find")] for job_id in ids.values()]
    urls += [
        "/metrics",
        "/healthz",
        reverse("admin:queues_deadletter_changelist"),
        reverse("admin:queues_deadletter_change", args=[row.pk]),
        reverse("admin:queues_deadletter_retry", args=[row.pk]),
    ]
    urls += [f"/jobs/{job_id}/" for job_id in ids.values()]

    # Twice: with the pickled job queued, and without it, so that pages which stop at the queued job
    # (whose meta is no JSON: a 500 of issue 10's item 3, not this test's business) count the registries.
    # Each URL is checked on its own, so a failure names the page that unpickled or wrote.
    for round_ in ("queued job planted", "registries only"):
        harm = {}
        for url in urls:
            before = snapshot(admin_redis)
            status = operator.get(url).status_code
            files, changed = sorted(p.name for p in trap.iterdir()), changed_keys(before, snapshot(admin_redis))
            if files or changed:
                harm[url] = (status, files, changed)
        assert (round_, harm) == (round_, {})
        admin_redis.lrem(get_queue("default").key, 0, ids["queued"])
    assert operator.get(reverse("django_rq:home")).status_code == 200  # it counted every planted registry


def test_reconcile_mirrors_a_pickled_failed_job_without_unpickling_it(queue_redis, tmp_path):
    # The worker and schedulers get the same test with the worker issue; reconcile is web-side too.
    from queues.failures import deadletter
    from queues.models import DeadLetter

    plant(queue_redis, tmp_path)
    summary = deadletter.reconcile()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert (summary.mirrored, summary.errors) == (1, 0)
    # Its hash is no job (pickled data): mirrored as a corrupt row, the raw hash kept (deadletter.bury_corrupt).
    assert list(DeadLetter.objects.values_list("job_id", "status", "func_path", "reason")) == [
        ("planted-failed", "open", "<corrupt job>", "corrupt")
    ]


def test_the_trap_works_rqs_own_cleanup_of_the_stale_started_entry_unpickles_it(queue_redis, tmp_path):
    # What the panel did before readonly.py (and what a worker without JSON would do).
    from rq.registry import StartedJobRegistry

    plant(queue_redis, tmp_path)
    StartedJobRegistry("default", connection=queue_redis).cleanup()
    assert "started-meta" in [p.name for p in tmp_path.iterdir()]


# --- django-rq's management commands that the project does not replace otherwise ------------------


def test_rqstats_reads_json_only_and_writes_nothing(queue_redis, admin_redis, tmp_path, capsys):
    from django.core.management import call_command

    plant(queue_redis, tmp_path)
    admin_redis.lrem(get_queue("default").key, 0, "planted-queued")  # its meta would stop the count early
    before = snapshot(admin_redis)
    call_command("rqstats", "--json")
    stats = {q["name"]: q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert (stats["default"]["started_jobs"], stats["default"]["failed_jobs"]) == (1, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert changed_keys(before, snapshot(admin_redis)) == []


def test_rqenqueue_goes_through_queues_enqueue_call(queue_redis, django_capture_on_commit_callbacks):
    from django.core.management import call_command

    from queues.catalog.lookup import OptimaJob

    with django_capture_on_commit_callbacks(execute=True):  # the test's transaction; a shell has none
        call_command("rqenqueue", "-q", "default", "--json", "tests.jobs.sample.add", "2", "3", verbosity=0)
    (job_id,) = get_queue("default").get_job_ids()
    job = OptimaJob.fetch(job_id, connection=queue_redis)
    assert (job.func_name, job.args, job.meta["queue"], job.meta["attempt"]) == (
        "tests.jobs.sample.add",
        [2, 3],
        "default",
        1,
    )


def test_rqenqueue_refuses_what_queues_enqueue_refuses(queue_redis):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="Unknown queue 'nope'"):
        call_command("rqenqueue", "-q", "nope", "tests.jobs.sample.add", "2", "3")
    with pytest.raises(CommandError, match="--json: an argument is not JSON"):
        call_command("rqenqueue", "--json", "tests.jobs.sample.add", "two")
    assert get_queue("default").get_job_ids() == []


def test_rqcron_is_refused_with_the_way_to_run_periodic_jobs():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=r"OPTIMA_SCHEDULES .* run `manage.py rqscheduler`"):
        call_command("rqcron", "some.module")
