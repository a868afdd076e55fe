"""The panel's home page, its stats.json and ``manage.py rqstats`` (queues/board/stats.py, views.home): counts
per state of every queue in a few round trips, django-rq 4.2's JSON shape, poison shown not raised; django-rq's
metrics and rq's cron pages are gone from the panel."""

import json

import pytest
from django.core.management import call_command
from django.test import Client

import queues
from queues.catalog.lookup import get_queue
from queues.keyspace import keys
from queues.worker import pause
from tests.support.panel import dead_job, make_staff, prefix_dump, registered_worker

pytestmark = pytest.mark.django_db

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, orders-sync 2, repricer 3.
# django-rq 4.2's get_statistics keys of a queue (stats.json, rqstats --json): scrapers read these.
DJANGO_RQ_KEYS = {
    "name",
    "jobs",
    "oldest_job_timestamp",
    "index",
    "connection_kwargs",
    "scheduler_pid",
    "workers",
    "finished_jobs",
    "started_jobs",
    "deferred_jobs",
    "failed_jobs",
    "scheduled_jobs",
}


def dumps(connection, settings):
    return prefix_dump(connection, settings.QUEUE_PREFIX)


def enqueue_many(django_capture_on_commit_callbacks, name, count):
    with django_capture_on_commit_callbacks(execute=True):
        return [queues.enqueue(name, "tests.jobs.sample.add", i, 1) for i in range(count)]


def test_home_counts_every_state_of_every_queue_in_at_most_5_round_trips(
    client, queue_redis, round_trips, django_capture_on_commit_callbacks
):
    enqueue_many(django_capture_on_commit_callbacks, "default", 100)
    for _ in range(3):
        dead_job("default")
    dead_job("orders-sync")
    registered_worker(queue_redis, "w1", "default")
    pause.pause("content")
    response = round_trips.get(client, "/admin/queues/")
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    rows = {q["name"]: q for q in response.context["queues"]}
    assert (rows["default"]["jobs"], rows["default"]["failed_jobs"], rows["default"]["workers"]) == (100, 3, 1)
    assert rows["default"]["oldest_job_timestamp"] not in ("-", "corrupt")
    assert rows["orders-sync"]["failed_jobs"] == 1
    assert (rows["content"]["paused"], rows["default"]["paused"]) == (True, False)
    html = response.content.decode()
    assert 'href="/admin/queues/queues/1/failed/">3</a>' in html
    assert 'href="/admin/queues/workers/1/">1</a>' in html
    assert 'href="/admin/queues/stats.json/"' in html
    assert "View Metrics" not in html and "Cron Schedulers" not in html
    assert 'value="Resume content"' in html


def test_home_of_empty_queues_shows_dashes_and_the_scheduler_box(client, queue_redis):
    response = client.get("/admin/queues/")
    rows = {q["name"]: q for q in response.context["queues"]}
    assert rows["default"]["oldest_job_timestamp"] == "-"
    assert rows["default"]["jobs"] == 0
    ((where, scheduler),) = response.context["schedulers"].items()
    assert scheduler == {"count": 0, "index": 0}
    assert f'href="/admin/queues/schedulers/0/">{where}</a>' in response.content.decode()


def test_stats_json_has_django_rqs_shape_and_the_homes_counts(client, queue_redis, django_capture_on_commit_callbacks):
    enqueue_many(django_capture_on_commit_callbacks, "default", 2)
    dead_job("default")
    for path in ("/admin/queues/stats.json", "/admin/queues/stats.json/sometoken/"):
        response = client.get(path)
        assert response.status_code == 200
        found = {q["name"]: q for q in response.json()["queues"]}
        assert sorted(found) == ["content", "default", "orders-sync", "repricer"]
        for queue in found.values():
            assert set(queue) == DJANGO_RQ_KEYS | {"canceled_jobs", "problems"}
        default = found["default"]
        assert (default["jobs"], default["failed_jobs"], default["index"]) == (2, 1, DEFAULT)
        assert default["connection_kwargs"]["db"] == queue_redis.connection_pool.connection_kwargs["db"]
        assert "password" not in default["connection_kwargs"]


def test_a_poison_head_job_and_a_key_of_the_wrong_type_are_shown_not_raised(client, queue_redis, settings):
    queue = get_queue("default")
    queue_redis.rpush(queue.key, "planted")
    queue_redis.hset(keys.job_key("planted"), "no-data", "x")
    queue_redis.set(queue.failed_job_registry.key, "a string, not a zset")
    before = dumps(queue_redis, settings)
    response = client.get("/admin/queues/")
    assert response.status_code == 200
    default = {q["name"]: q for q in response.context["queues"]}["default"]
    assert (default["oldest_job_timestamp"], default["jobs"], default["failed_jobs"]) == ("corrupt", 1, 0)
    assert default["problems"] == [f"{queue.failed_job_registry.key} is a string, not a zset"]
    assert "queue-corrupt" in response.content.decode()
    assert client.get("/admin/queues/stats.json").json()["queues"][DEFAULT]["failed_jobs"] == 0
    assert dumps(queue_redis, settings) == before


def test_django_rqs_metrics_and_rqs_cron_pages_are_gone_from_the_panel(prod, django_user_model):
    staff = Client()
    staff.force_login(make_staff(django_user_model, "ops", "queues.view_queue_panel"))
    assert staff.get("/admin/queues/").status_code == 200
    for path in (
        "/admin/queues/metrics/",
        "/admin/queues/metrics",
        "/admin/queues/cron-schedulers/0/s1/",
        "/admin/queues/cron-schedulers/0/s1/jobs/c1/",
    ):
        assert staff.get(path).status_code == 404, path


def test_rqstats_prints_the_table_and_the_json_of_the_statistics(
    queue_redis, capsys, django_capture_on_commit_callbacks
):
    enqueue_many(django_capture_on_commit_callbacks, "default", 3)
    dead_job("default")
    call_command("rqstats")
    table = capsys.readouterr().out
    assert "| Name           |    Queued |    Active |  Deferred |  Finished |    Failed |   Workers |" in table
    assert "| default        |         3 |         0 |         0 |         0 |         1 |         0 |" in table
    call_command("rqstats", "--json")
    found = {q["name"]: q for q in json.loads(capsys.readouterr().out)["queues"]}
    assert set(found["default"]) >= DJANGO_RQ_KEYS
    assert (found["default"]["jobs"], found["default"]["failed_jobs"]) == (3, 1)


@pytest.mark.django_db(transaction=True)  # the enqueues written at once
def test_each_servers_queues_are_read_on_it_and_a_server_down_is_named_while_the_others_show(
    client, queue_redis, second_redis
):
    """Issue 36: two redis-servers. The home page reads b's queues (counts, pause) on b; with b stopped it names
    b and lists its queues without counts, the default server's still counted; b's queue page answers 503
    naming b."""
    import redis  # the test's own client of b

    queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    for i in range(2):
        queues.enqueue("on-b", "tests.jobs.sample.add", i, 2)
    pause.pause("on-b")
    b = redis.Redis.from_url(second_redis.url)
    assert b.smembers(keys.paused_key()) == {b"on-b"} and queue_redis.smembers(keys.paused_key()) == set()
    response = client.get("/admin/queues/")
    assert response.status_code == 200
    rows = {q["name"]: q for q in response.context["queues"]}
    assert (rows["on-b"]["jobs"], rows["on-b"]["paused"], rows["default"]["jobs"]) == (2, True, 1)
    assert rows["on-b"]["connection_kwargs"]["port"] == second_redis.port
    assert response.context["servers_down"] == {}
    page = client.get(f"/admin/queues/queues/{rows['on-b']['index']}/")
    assert page.status_code == 200
    assert len(get_queue("on-b").job_ids) == 2 and all(i in page.content.decode() for i in get_queue("on-b").job_ids)

    second_redis.stop()
    response = client.get("/admin/queues/")
    assert response.status_code == 200
    rows = {q["name"]: q for q in response.context["queues"]}
    assert response.context["servers_down"] == {"b": second_redis.url}
    assert (rows["on-b"]["jobs"], rows["on-b"]["down"]["server"], rows["on-b-2"]["down"]["server"]) == (None, "b", "b")
    assert (rows["default"]["jobs"], "down" in rows["default"]) == (1, False)
    html = response.content.decode()
    assert f"Redis server <strong>b</strong> (<code>{second_redis.url}</code>) does not answer" in html
    assert "server b down" in html
    page = client.get(f"/admin/queues/queues/{rows['on-b']['index']}/")
    assert page.status_code == 503
    assert f"{second_redis.url} (server &#x27;b&#x27;)" in page.content.decode()
    assert client.get(f"/admin/queues/queues/{rows['default']['index']}/").status_code == 200


def test_each_queues_recent_history_is_read_on_its_own_server(client, queue_redis, second_redis):
    """Issue 36: the workers of each server sample their own Redis; a queue's bars come from its server's samples
    (the default server's list counts b's queues as 0: they are not there)."""
    import time

    import redis  # the test's own client of b

    from queues.metrics import history, store

    b = redis.Redis.from_url(second_redis.url)
    now = time.time()
    for at, (on_b, on_default) in ((now - 61, ((10, 0), (3, 0))), (now - 1, ((15, 1), (5, 0)))):
        b.hset(store.counters_key("on-b"), mapping={store.PROCESSED: on_b[0], store.FAILED: on_b[1]})
        queue_redis.hset(store.counters_key("default"), mapping={store.PROCESSED: on_default[0], store.FAILED: 0})
        history.sample(b, at)
        history.sample(queue_redis, at)
    rows = {row["name"]: row for row in client.get("/admin/queues/").context["history"]}
    assert (rows["on-b"]["completed"], rows["on-b"]["failed"]) == (4, 1)
    assert (rows["default"]["completed"], rows["default"]["failed"]) == (2, 0)
    assert [row["name"] for row in client.get("/admin/queues/").context["history"]] == [
        "content",
        "default",
        "on-b",
        "on-b-2",
        "orders-sync",
        "repricer",
    ]
