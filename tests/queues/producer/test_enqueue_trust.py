"""What a writer to Redis can do to an enqueue (issue 32): a key of the wrong type runs no job twice.

A WRONGTYPE inside the enqueue's MULTI does not stop the transaction's other commands: the push has
happened when the key is set aside. Each test turns one key the enqueue writes into another type,
enqueues through every path (single, with a ``job_id``, ``unique=``, through the outbox, ``enqueue_many``
of 20, with and without ids and through the outbox), each time planting the key again, then runs a real
burst worker: every job ran exactly once, and every planted key was renamed aside.
"""

import datetime as dt
from pathlib import Path

import pytest
from django.utils import timezone
from rq.queue import Queue

import queues
from queues.keyspace import keys
from queues.producer import limits, write
from queues.search import index as search_index
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

QUEUE = "default"
FUNC = "tests.jobs.sample.touch"
LIMIT = {"limit_key": "seller-1", "limit_concurrency": 1000}


def _limit_keys(which):
    return lambda: getattr(keys, which)(limits.scoped(QUEUE, LIMIT["limit_key"]))


# family -> (the key, as a callable; the options every enqueue of the family takes)
FAMILIES = {
    "search index: queue set": (lambda: keys.search_queue_key(QUEUE), {}),
    "search index: function set": (lambda: keys.search_func_key(FUNC), {}),
    "search index: functions list": (keys.search_functions_key, {}),
    "rq's set of queues": (lambda: Queue.redis_queues_keys, {}),
    "band: normal": (lambda: keys.queue_key(QUEUE), {}),
    "band: high": (lambda: keys.band_key(keys.queue_key(QUEUE), "high"), {"priority": 10}),
    "scheduled registry": (lambda: keys.scheduled_key(QUEUE), {"delay": 1}),
    "limit: set of keys in use": (keys.limit_keys_key, LIMIT),
    "limit: concurrency hash": (_limit_keys("limit_config_key"), LIMIT),
    "limit: slots": (_limit_keys("limit_allowed_key"), LIMIT),
    "limit: held jobs": (_limit_keys("limit_held_key"), LIMIT),
}


def plant(connection, key):
    """``key`` turned into a string: no write of an enqueue expects one (a SET writes any type)."""
    search_index._refreshed.clear()  # the functions list is written once a minute per process: now
    write._queue_set_at.clear()  # and rq's set of queues
    connection.set(key, "planted: a string, of no type the enqueue writes")


class Stash:
    """What a queue list or the scheduled registry held before the key is planted again (a SET would
    drop the jobs already pushed), put back before the worker runs."""

    def __init__(self, connection):
        self.connection, self.lists, self.scheduled = connection, {}, {}

    def take(self, key):
        kind = self.connection.type(key)
        if kind == b"list":
            self.lists.setdefault(key, []).extend(self.connection.lrange(key, 0, -1))
        elif kind == b"zset":
            self.scheduled.update(dict(self.connection.zrange(key, 0, -1, withscores=True)))
        self.connection.delete(key)

    def put_back(self, key):
        self.connection.delete(key)
        for list_key, ids in self.lists.items():
            self.connection.rpush(list_key, *ids)
        if self.scheduled:
            self.connection.zadd(key, self.scheduled)


def enqueue_every_way(connection, key, options, tmp_path):
    """Each enqueue path once, the key planted again before each; -> {file: (way, its job's id)} and
    the jobs pushed other than once, by way."""
    runs, wrong = {}, []
    slug = "".join(ch if ch.isalnum() else "-" for ch in key)[-40:]
    stash = Stash(connection)

    def path(name):
        return str(tmp_path / f"{name}.txt")

    ways = [
        ("single", lambda: [queues.enqueue(QUEUE, FUNC, path("single"), **options)]),
        ("job_id", lambda: [queues.enqueue(QUEUE, FUNC, path("job_id"), job_id=f"{slug}-one", **options)]),
        ("unique", lambda: [queues.enqueue(QUEUE, FUNC, path("unique"), unique="u-1", **options)]),
        ("durable", lambda: [queues.enqueue(QUEUE, FUNC, path("durable"), durable=True, **options)]),
        ("many", lambda: queues.enqueue_many(QUEUE, FUNC, [(path(f"many-{i}"),) for i in range(20)], **options)),
        (
            "many with ids",
            lambda: queues.enqueue_many(
                QUEUE, FUNC, [queues.Call(args=[path(f"ids-{i}")], job_id=f"{slug}-{i}") for i in range(20)], **options
            ),
        ),
        (
            "many durable",
            lambda: queues.enqueue_many(
                QUEUE, FUNC, [(path(f"durable-{i}"),) for i in range(20)], durable=True, **options
            ),
        ),
    ]
    pushed_to = key in (*keys.band_keys(keys.queue_key(QUEUE)), keys.scheduled_key(QUEUE))
    for name, enqueue in ways:
        if pushed_to:
            stash.take(key)
        plant(connection, key)
        jobs = enqueue()
        counted = pushes(connection, [job.id for job in jobs])
        wrong += [f"{name}: {n}" for n in sorted(set(counted.values())) if n != 1]
        runs.update({job.args[0]: (name, job.id) for job in jobs})
    if pushed_to:
        stash.take(key)
        stash.put_back(key)
    return runs, wrong


def pushes(connection, job_ids):
    """{job id: times it sits in the queue's lists and the scheduled registry}."""
    found = dict.fromkeys(job_ids, 0)
    for band_key in keys.band_keys(keys.queue_key(QUEUE)):
        for raw in connection.lrange(band_key, 0, -1) if connection.type(band_key) == b"list" else []:
            if raw.decode() in found:
                found[raw.decode()] += 1
    if connection.type(keys.scheduled_key(QUEUE)) == b"zset":
        for raw in connection.zrange(keys.scheduled_key(QUEUE), 0, -1):
            if raw.decode() in found:
                found[raw.decode()] += 1
    return found


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_key_of_the_wrong_type_in_an_enqueue_leaves_exactly_one_run_per_job(
    family, queue_redis, start_worker, tmp_path
):
    key_of, options = FAMILIES[family]
    key = key_of()
    runs, pushed_wrong = enqueue_every_way(queue_redis, key, options, tmp_path)
    assert len(runs) == 4 + 3 * 20
    assert pushed_wrong == [], f"pushed other than once, by way of: {pushed_wrong}"
    assert len(queue_redis.keys(f"{key}.corrupt-*")) == 7  # each planting set aside, none left in place
    assert queue_redis.type(key) != b"string"
    if "delay" in options:  # due in a second: the burst worker's scheduler moves it
        due = timezone.now() + dt.timedelta(seconds=1.5)
        wait_for(lambda: timezone.now() > due, message="the delayed jobs to be due")
    worker = start_worker(QUEUE, "--burst")
    assert worker.wait(120) == 0, worker.output()
    lines = {path: Path(path).read_text().count("\n") if Path(path).exists() else 0 for path in runs}
    wrong = sorted(f"{runs[path][0]}: {n}" for path, n in lines.items() if n != 1)
    assert wrong == [], f"runs other than one: {wrong}"


def test_a_held_job_whose_promotion_meets_a_queue_list_of_the_wrong_type_is_pushed_once(queue_redis):
    """rq's promotion Lua takes the job from the held set, then its push fails: a script's writes stay,
    so the job sat in its key's slots, held, in no list; it is given back and promoted once."""
    plant(queue_redis, keys.queue_key(QUEUE))
    job = queues.enqueue(QUEUE, FUNC, "/nonexistent/never-run", limit_key="seller-2", limit_concurrency=1)
    scoped = limits.scoped(QUEUE, "seller-2")
    assert pushes(queue_redis, [job.id]) == {job.id: 1}
    assert queue_redis.hget(job.key, "status") == b"queued"
    assert queue_redis.zrange(keys.limit_allowed_key(scoped), 0, -1) == [job.id.encode()]
    assert queue_redis.zcard(keys.limit_held_key(scoped)) == 0
    assert len(queue_redis.keys(f"{keys.queue_key(QUEUE)}.corrupt-*")) == 1


BAD_IDS = ["x y", "a/b", "..", "a:b", "", "é", "line\nbreak", "tab\there", "x" * 201, 42]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_job_id_rq_would_refuse_is_an_invalid_job_naming_the_item_the_field_the_value_and_the_fix(bad, admin_redis):
    calls = [(1, 2), queues.Call(args=[3, 4], job_id="fine_id-1"), queues.Call(args=[5, 6], job_id=bad)]
    # this test process's job keys (other xdist processes write under their own prefixes meanwhile)
    before = set(admin_redis.scan_iter(match=keys.job_key("*")))
    with pytest.raises(queues.InvalidJob) as batch:  # it was rq's bare ValueError
        queues.enqueue_many(QUEUE, "tests.jobs.sample.add", calls)
    with pytest.raises(queues.InvalidJob) as single:
        queues.enqueue(QUEUE, "tests.jobs.sample.add", 1, 2, job_id=bad)
    for message, where in ((str(batch.value), "calls[2]: "), (str(single.value), "")):
        assert message.startswith(f"{where}job_id must be a non-empty string of letters, digits, '_' and '-'")
        assert f"got {bad!r}" in message[:400] if len(repr(bad)) < 100 else f"got {repr(bad)[:60]}" in message
        assert "e.g. job_id='order-42'" in message
    assert set(admin_redis.scan_iter(match=keys.job_key("*"))) == before  # nothing of the batch was written


@pytest.mark.parametrize("family", ["search index: queue set", "rq's set of queues", "band: normal"])
def test_a_relay_from_the_outbox_into_a_key_of_the_wrong_type_pushes_its_job_once(family, queue_redis):
    from queues import conf
    from queues.catalog.lookup import get_queue
    from queues.jobs import signing
    from queues.models import OutboxEntry
    from queues.producer import outbox

    job = get_queue(QUEUE).create_job(FUNC, args=["/nonexistent/never-run"], meta={"queue": QUEUE, "attempt": 1})
    job.signature = signing.sign(job)
    OutboxEntry.objects.create(
        prefix=conf.prefix(), queue=QUEUE, job_id=job.id, job=outbox.encode(job.to_dict()), created_at=timezone.now()
    )
    key = FAMILIES[family][0]()
    plant(queue_redis, key)
    assert outbox.relay_all() == (1, 0)
    assert pushes(queue_redis, [job.id]) == {job.id: 1}  # it was 2: the relay's write was sent twice
    assert (len(queue_redis.keys(f"{key}.corrupt-*")), OutboxEntry.objects.count()) == (1, 0)


@pytest.mark.parametrize("planted", ["hash", "list", "not a job id", "a job id rq rejects: a/b"])
def test_a_unique_key_of_the_wrong_type_or_content_is_replaced_and_its_job_pushed_once(planted, queue_redis):
    key = keys.unique_key(QUEUE, "u-2")
    if planted == "hash":
        queue_redis.hset(key, "planted", "a hash")
    elif planted == "list":
        queue_redis.rpush(key, "planted")
    else:
        queue_redis.set(key, planted)
    job = queues.enqueue(QUEUE, FUNC, "/nonexistent/never-run", unique="u-2")
    again = queues.enqueue(QUEUE, FUNC, "/nonexistent/never-run", unique="u-2")
    assert (again.id, queue_redis.get(key)) == (job.id, job.id.encode())  # the key repaired: it holds the job
    assert pushes(queue_redis, [job.id]) == {job.id: 1}


def test_a_queue_that_runs_its_jobs_in_the_caller_runs_one_once_past_a_key_of_the_wrong_type(queue_redis, tmp_path):
    from queues.catalog.classes import OptimaQueue
    from queues.jobs import signing
    from queues.producer.write import write_job

    queue = OptimaQueue(QUEUE, connection=queue_redis, is_async=False)
    path = tmp_path / "ran.txt"
    job = queue.create_job(FUNC, args=[str(path)], meta={"queue": QUEUE, "attempt": 1})
    job.signature = signing.sign(job)
    for family in ("rq's set of queues", "search index: queue set"):
        plant(queue_redis, FAMILIES[family][0]())
    write_job(queue, job, None)
    assert path.read_text() == "done\n"  # ran once, in this call
    assert [
        len(queue_redis.keys(f"{FAMILIES[f][0]()}.corrupt-*"))
        for f in ("rq's set of queues", "search index: queue set")
    ] == [1, 1]
