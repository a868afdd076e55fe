"""Retention: completed jobs capped per queue with every key of theirs, kept 24 h; dead jobs kept."""

import pytest
from rq.registry import FinishedJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.conf import prefix
from queues.jobs.retention import enforce_completed_max
from tests.support.lifecycle import WORKER_ENV


def job_ids_with_keys(admin_redis):
    """{kind: set of job ids} of every job-related key under the prefix."""
    found = {"job": set(), "results": set(), "other": set()}
    for raw in admin_redis.scan_iter(match=f"{prefix()}:*", count=1000):
        key = raw.decode()
        parts = key.split(":")
        if parts[1] == "job":
            found["job" if len(parts) == 3 else "other"].add(parts[2])
        elif parts[1] == "results":
            found["results"].add(parts[2])
        elif parts[1] in ("executions", "execution"):
            found["other"].add(parts[2])
    return found


def enqueue_many(name, count):
    return [queues.enqueue(name, "tests.jobs.lifecycle.quick", i).id for i in range(count)]


@pytest.mark.slow
@pytest.mark.once  # Redis and a worker process only: CI's SQLite pass (pytest.ini)
@pytest.mark.django_db(transaction=True)
def test_of_1500_quick_jobs_the_newest_1000_completed_remain_with_no_orphan_keys(
    start_worker, queue_redis, admin_redis
):
    ids = enqueue_many("default", 1500)
    worker = start_worker("default", "--burst", "--without-scheduler")
    assert worker.wait(600) == 0, worker.output()[-2000:]

    finished = FinishedJobRegistry("default", connection=queue_redis)
    kept = set(finished.get_job_ids())
    keys = job_ids_with_keys(admin_redis)
    assert len(kept) == 1000
    assert kept == set(ids[500:])
    assert keys["job"] == kept
    assert keys["results"] == kept
    assert keys["other"] - kept == set()
    newest = OptimaJob.fetch(ids[-1], connection=queue_redis)
    assert newest.return_value() == 1499
    assert 86000 < queue_redis.ttl(newest.key) <= 86400
    assert 86000 < queue_redis.ttl(f"{prefix()}:results:{newest.id}") <= 86400


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_completed_max_is_overridable_per_queue(start_worker, queue_redis, admin_redis, lifecycle_queue):
    ids = enqueue_many("lifecycle", 15)
    worker = start_worker("lifecycle", "--burst", "--without-scheduler", env=WORKER_ENV)
    assert worker.wait(120) == 0, worker.output()[-2000:]
    kept = set(FinishedJobRegistry("lifecycle", connection=queue_redis).get_job_ids())
    assert kept == set(ids[5:])
    assert job_ids_with_keys(admin_redis)["job"] == kept


def test_trimming_removes_only_the_excess_and_is_a_no_op_under_the_cap(queue_redis, admin_redis):
    queue = get_queue("default")
    registry = FinishedJobRegistry("default", connection=queue_redis)
    ids = []
    for i in range(5):
        job = queues.enqueue("default", "tests.jobs.lifecycle.quick", i)
        queue_redis.xadd(f"{prefix()}:results:{job.id}", {"type": "1"})
        queue_redis.zadd(registry.key, {job.id: 2_000_000_000 + i})
        ids.append(job.id)
    assert enforce_completed_max(queue, keep=5) == 0
    assert enforce_completed_max(queue, keep=2) == 3
    assert registry.get_job_ids(cleanup=False) == ids[3:]
    assert job_ids_with_keys(admin_redis)["results"] == set(ids[3:])
    assert job_ids_with_keys(admin_redis)["job"] == set(ids[3:])


def test_jobs_the_cap_removes_leave_the_search_index_with_their_keys(queue_redis, admin_redis):
    """Retention keeps 1,000 completed jobs a queue; the index (queues/search/) must not keep the rest for
    24 h: Redis memory would grow with every job (bench/scaling.py's 100,000 jobs: +20 MiB)."""
    from queues.keyspace import keys

    queue = get_queue("default")
    registry = FinishedJobRegistry("default", connection=queue_redis)
    jobs = [
        queues.enqueue_call("default", "tests.jobs.lifecycle.quick", (i,), meta={"owner": owner})
        for i, owner in enumerate([7, "anonymous", 7, "anonymous", 7])
    ]
    for i, job in enumerate(jobs):
        queue_redis.zadd(registry.key, {job.id: 2_000_000_000 + i})
    index = [
        keys.search_queue_key("default"),
        keys.search_func_key("tests.jobs.lifecycle.quick"),
        keys.search_owner_key(7),
        keys.search_owner_key("anonymous"),
    ]
    assert [admin_redis.zcard(key) for key in index] == [5, 5, 3, 2]
    assert enforce_completed_max(queue, keep=2) == 3
    kept = {job.id for job in jobs[3:]}
    members = [{m.decode() for m in admin_redis.zrange(key, 0, -1)} for key in index]
    assert members == [kept, kept, {jobs[4].id}, {jobs[3].id}]
    found = queues.search_jobs(function="tests.jobs.lifecycle.quick")
    assert [hit.job_id for hit in found.hits] == [jobs[4].id, jobs[3].id]
    assert found.total == 2


def test_rq_3_job_delete_removes_the_results_stream_too(queue_redis):
    """Checked because rq 2.x's job.delete() left ``results:<id>`` behind; 3.0.0 deletes it."""
    job = queues.enqueue("default", "tests.jobs.lifecycle.quick", 1)
    queue_redis.xadd(f"{prefix()}:results:{job.id}", {"type": "1"})
    OptimaJob.fetch(job.id, connection=queue_redis).delete()
    assert queue_redis.exists(f"{prefix()}:results:{job.id}", job.key) == 0


def _trim_many(connection, func, owners, count):
    """``count`` completed jobs of "default" (alternating ``owners``), with their results and search index entries."""
    from queues.keyspace import keys

    ids = [f"trim{n:05d}" for n in range(count)]
    with connection.pipeline(transaction=False) as pipe:
        for n, job_id in enumerate(ids):
            owner = owners[n % 2]
            pipe.hset(keys.job_key(job_id), mapping={"description": f"{func}({n})", "meta": f'{{"owner": "{owner}"}}'})
            pipe.xadd(keys.results_key(job_id), {"type": "1"})
            pipe.zadd(keys.finished_key("default"), {job_id: 2_000_000_000 + n})
            pipe.zadd(keys.search_queue_key("default"), {job_id: n})
            pipe.zadd(keys.search_func_key(func), {job_id: n})
            pipe.zadd(keys.search_owner_key(owner), {job_id: n})
        pipe.execute()
    return ids


@pytest.mark.parametrize("sort", ["allowed", "refused"])
def test_a_trim_of_many_jobs_reads_them_in_one_sort_and_costs_a_few_commands(private_redis, sort):
    """Past the cap a worker trims every ``trim_every`` jobs, so the trim's commands are paid by every job (issue 36):
    the removed jobs' ids and fields are read in one SORT, they leave each index set in one ZREM and their keys go in
    one DEL, a command for up to 1,000 of them (Lua's unpack has a limit). A Redis that refuses the SORT (an ACL,
    as Redis 7 refuses its GET patterns to a user confined to the prefix) gets an HMGET a job instead, the same
    removals, and is not asked for a SORT again by this process."""
    import redis

    from queues.jobs import retention
    from queues.keyspace import keys

    admin = redis.Redis.from_url(private_redis.url)
    connection = admin
    if sort == "refused":
        admin.acl_setuser("trimmer", enabled=True, nopass=True, keys=["*"], commands=["+@all", "-sort"])
        connection = redis.Redis.from_url(private_redis.url, username="trimmer")
    queue = get_queue("default", connection=connection)
    func, owners, count = "tests.jobs.lifecycle.quick", ["7", "anonymous"], 2_600
    ids = _trim_many(connection, func, owners, count)
    before = admin.info("commandstats")
    assert enforce_completed_max(queue, keep=100) == count - 100
    after = admin.info("commandstats")

    def calls(name):
        return after.get(f"cmdstat_{name}", {}).get("calls", 0) - before.get(f"cmdstat_{name}", {}).get("calls", 0)

    def refusals():  # the SORTs the ACL refused (a refused command is not in its commandstats' calls)
        return sum(int(entry["count"]) for entry in admin.acl_log() if entry["object"] == "sort")

    if sort == "allowed":
        assert (calls("sort"), calls("hmget"), calls("zrange")) == (1, 0, 0)
    else:
        assert (refusals(), calls("hmget"), calls("zrange")) == (1, count - 100, 1)
    assert calls("zrem") == 3 + 3 + 2 + 2  # 2,500 ids off the queue's and the function's sets, 1,250 off each owner's
    assert calls("del") == 13  # 2,500 jobs' 5 keys each, 1,000 keys a DEL
    kept = set(ids[-100:])
    assert {m.decode() for m in connection.zrange(keys.finished_key("default"), 0, -1)} == kept
    for index in (keys.search_queue_key("default"), keys.search_func_key(func)):
        assert {m.decode() for m in connection.zrange(index, 0, -1)} == kept
    assert {m.decode() for m in connection.zrange(keys.search_owner_key("7"), 0, -1)} == set(ids[-100::2])
    assert {m.decode() for m in connection.zrange(keys.search_owner_key("anonymous"), 0, -1)} == set(ids[-99::2])
    assert connection.exists(*[keys.job_key(job_id) for job_id in ids[:-100]]) == 0
    assert connection.exists(*[keys.results_key(job_id) for job_id in ids[:-100]]) == 0
    assert connection.exists(*[keys.job_key(job_id) for job_id in kept]) == 100
    _trim_many(connection, func, owners, 150)  # 50 more over the cap (the first 100 ids again, and 50 kept ones)
    before = admin.info("commandstats")
    assert enforce_completed_max(queue, keep=100) > 0
    after = admin.info("commandstats")
    assert calls("sort") == (1 if sort == "allowed" else 0)
    assert refusals() == (0 if sort == "allowed" else 1)  # a refusal is not asked for again
    retention._refused.discard(id(connection))


def test_a_worker_trims_a_queue_every_100_jobs_or_a_tenth_of_a_smaller_cap_and_when_it_goes_idle(monkeypatch):
    """Each trim is a round trip of the worker's main thread: every 100 jobs of a queue capped at 1,000 (99 over
    the cap at most, for a moment), every cap/10 under it, and whatever was noted when the worker goes idle."""
    from queues.jobs import retention

    assert [retention.trim_every(cap) for cap in (1000, 5000, 500, 10, 5, 0)] == [100, 100, 50, 1, 1, 1]
    trimmed = []
    monkeypatch.setattr(retention, "enforce_completed_max", lambda queue: trimmed.append(queue.name))
    completions = retention.Completions()
    queue, job = get_queue("default"), queues.enqueue("default", "tests.jobs.lifecycle.quick", 1)
    for _ in range(99):
        completions.note(queue, job, rescore=False)
        completions.trim()
    assert trimmed == []
    completions.note(queue, job, rescore=False)
    completions.trim()
    assert trimmed == ["default"]
    completions.note(queue, job, rescore=False)
    completions.trim()
    assert trimmed == ["default"]
    completions.trim(idle=True)
    assert trimmed == ["default", "default"]
