"""The panel's workers page, a worker's page and rq-scheduler's jobs (queues/board/workers.py): read in a few
pipelined round trips whatever their number, a worker or entry rq cannot read left out, nothing written."""

import datetime as dt

import pytest
from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE, Execution
from rq.worker import Worker

import queues
from queues.catalog.lookup import get_queue
from queues.jobs import execution as execution_record
from queues.keyspace import keys
from queues.periodic.plan import scheduled_jobs_key
from queues.periodic.scheduler import PrefixedScheduler
from tests.support.panel import prefix_dump, registered_worker

pytestmark = pytest.mark.django_db

DEFAULT = 1  # django-rq numbers queues by sorted name: content 0, default 1, orders-sync 2, repricer 3.


def dumps(connection, settings):
    return prefix_dump(connection, settings.QUEUE_PREFIX)


def test_the_workers_page_lists_20_workers_in_at_most_5_round_trips(client, queue_redis, round_trips):
    for i in range(20):
        key = registered_worker(queue_redis, f"w{i:02}", "default")
        queue_redis.hset(key, mapping={"pid": 1000 + i, "state": "busy" if i % 2 else "idle"})
    registered_worker(queue_redis, "other", "content")
    response = round_trips.get(client, f"/admin/queues/workers/{DEFAULT}/")
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    html = response.content.decode()
    names = [w.name for w in response.context["workers"]]
    assert names == [f"w{i:02}" for i in range(20)]
    assert f'href="/admin/queues/workers/{DEFAULT}/{Worker.redis_worker_namespace_prefix}w03/">w03</a>' in html
    assert "<td>1003</td>" in html and "<td>busy</td>" in html and "<td>idle</td>" in html
    assert "other" not in names
    assert '<time datetime="2026-01-01T00:00:00+00:00"' in html  # the birth, in django-rq's tooltip markup


def test_a_worker_rq_cannot_read_is_left_out_and_its_page_answers_404(client, queue_redis, settings):
    registered_worker(queue_redis, "good", "default")
    bad = registered_worker(queue_redis, "bad", "default")
    queue_redis.hset(bad, "birth", "not a date")
    planted = f"{Worker.redis_worker_namespace_prefix}planted"
    queue_redis.set(planted, "a string, not a hash")
    queue_redis.sadd(f"{Worker.redis_worker_namespace_prefix.rstrip(':')}s:default", planted, "not-a-worker-key")
    before = dumps(queue_redis, settings)
    response = client.get(f"/admin/queues/workers/{DEFAULT}/")
    assert response.status_code == 200
    assert [w.name for w in response.context["workers"]] == ["good"]
    assert client.get(f"/admin/queues/workers/{DEFAULT}/{bad}/").status_code == 404
    assert client.get(f"/admin/queues/workers/{DEFAULT}/{planted}/").status_code == 404
    assert dumps(queue_redis, settings) == before


@pytest.mark.parametrize("release", ["this", "last"])
def test_a_workers_page_shows_its_current_job_in_at_most_5_round_trips_and_writes_nothing(
    client, queue_redis, round_trips, settings, django_capture_on_commit_callbacks, release
):
    with django_capture_on_commit_callbacks(execute=True):
        job = queues.enqueue("default", "tests.jobs.sample.add", 2, 3)
    key = registered_worker(queue_redis, "busy-one", "default")
    queue_redis.hset(
        key,
        mapping={
            "pid": 4242,
            "state": "busy",
            "successful_job_count": 7,
            "failed_job_count": 2,
            "queues": "default,content",
        },
    )
    executions = WORKER_EXECUTIONS_KEY_TEMPLATE.format("busy-one")
    stale = Execution.from_composite_key(f"{job.id}:gone", connection=queue_redis)  # not the job's current one
    live = Execution.from_composite_key(f"{job.id}:e1", connection=queue_redis)
    if release == "this":  # the job's hash names its current execution; no hash, no set (queues/jobs/execution.py)
        queue_redis.hset(job.key, mapping={"worker_name": "busy-one", execution_record.FIELD: "e1"})
    else:  # the execution hash and the worker's set a release before issue 36's fifth pass wrote
        queue_redis.hset(live.key, mapping={"worker_name": "busy-one", "started_at": "2026-01-01T00:00:00Z"})
        queue_redis.sadd(executions, stale.composite_key, live.composite_key)
    queue_redis.zadd(keys.started_key("default"), {stale.composite_key: 1, live.composite_key: 2})
    before = dumps(queue_redis, settings)
    response = round_trips.get(client, f"/admin/queues/workers/{DEFAULT}/{key}/")
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    html = response.content.decode()
    assert response.context["job"].id == job.id
    assert f'href="/admin/queues/queues/{DEFAULT}/{job.id}/">{job.id}</a>' in html
    assert "tests.jobs.sample.add" in html
    assert ">default, content</div>" in html and ">4242</div>" in html and ">7</div>" in html
    assert f'href="/admin/queues/workers/{DEFAULT}/">default Workers</a>' in html
    assert dumps(queue_redis, settings) == before  # rq's own read SREMs the stale execution


def test_rq_schedulers_jobs_page_of_100_jobs_in_at_most_5_round_trips(client, queue_redis, round_trips):
    scheduler = PrefixedScheduler(queue_name="default", connection=queue_redis)
    start = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    for i in range(120):
        scheduler.schedule(start + dt.timedelta(minutes=i), "tests.jobs.sample.add", args=[i, 1], interval=60, repeat=3)
    assert queue_redis.zcard(scheduled_jobs_key()) == 120
    response = round_trips.get(client, f"/admin/queues/schedulers/{DEFAULT}/")
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    rows = response.context["jobs"]
    assert len(rows) == 100 and response.context["num_jobs"] == 120
    assert rows[0]["schedule"] == "interval: 60 repeat: 3"
    assert rows[0]["next_run"] == start
    html = response.content.decode()
    assert f'href="/admin/queues/queues/{DEFAULT}/{rows[0]["id"]}/">' in html
    assert "120 jobs" in html and 'href="?page=2"' in html
    page2 = client.get(f"/admin/queues/schedulers/{DEFAULT}/?page=2")
    assert len(page2.context["jobs"]) == 20


def test_rq_schedulers_set_of_the_wrong_type_or_a_bad_score_is_shown_not_raised(client, queue_redis, settings):
    queue_redis.zadd(scheduled_jobs_key(), {"absurd": float("inf")})
    response = client.get(f"/admin/queues/schedulers/{DEFAULT}/")
    assert response.status_code == 200 and response.context["jobs"] == []
    queue_redis.delete(scheduled_jobs_key())
    queue_redis.set(scheduled_jobs_key(), "a string, not a zset")
    before = dumps(queue_redis, settings)
    response = client.get(f"/admin/queues/schedulers/{DEFAULT}/")
    assert response.status_code == 200
    assert (response.context["num_jobs"], response.context["jobs"]) == (0, [])
    assert dumps(queue_redis, settings) == before
    assert get_queue("default").count == 0
