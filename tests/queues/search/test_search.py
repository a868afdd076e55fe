"""``queues.search_jobs``: live jobs by function, queue, state, owner and argument text, from the index
every enqueue writes in its own MULTI (queues/search/)."""

import time

import pytest

import queues
from queues.keyspace import keys
from queues.search import index
from tests.jobs import sample


@pytest.fixture(autouse=True)
def _refresh_after_flush():
    index._refreshed.clear()  # the prefix is flushed between tests: this process's refreshes are stale


def ids(found):
    return [hit.job_id for hit in found.hits]


def test_an_enqueue_indexes_its_job_by_queue_function_and_owner_newest_first():
    first = queues.enqueue("default", sample.add, 1, 2)
    second = queues.enqueue_call("default", sample.fail, ("boom",), meta={"owner": 7})
    assert ids(queues.search_jobs(queue="default")) == [second.id, first.id]
    assert ids(queues.search_jobs(function="tests.jobs.sample.add")) == [first.id]
    assert ids(queues.search_jobs(owner=7)) == [second.id]
    assert ids(queues.search_jobs()) == [second.id, first.id]
    found = queues.search_jobs(function="tests.jobs.sample.fail")
    assert [(h.queue, h.state, h.function) for h in found.hits] == [("default", "queued", "tests.jobs.sample.fail")]


def test_a_batch_is_indexed_in_its_own_multi_in_order(admin_redis):
    jobs = queues.enqueue_many("default", sample.add, [(i, i) for i in range(30)], meta={"owner": "anonymous"})
    found = queues.search_jobs(queue="default", page_size=10)
    assert ids(found) == [job.id for job in reversed(jobs)][:10]
    assert (found.total, found.next_start, found.exact) == (30, 10, True)
    second = queues.search_jobs(queue="default", page_size=10, start=found.next_start)
    assert ids(second) == [job.id for job in reversed(jobs)][10:20]
    assert admin_redis.ttl(keys.search_owner_key("anonymous")) == index.retention_seconds()
    assert admin_redis.zcard(keys.search_owner_key("anonymous")) == 30


def test_text_matches_an_argument_or_the_id_case_insensitively_and_says_how_far_it_scanned():
    jobs = queues.enqueue_many("default", sample.fail, [(f"cabinet {i}",) for i in range(50)])
    found = queues.search_jobs(text="CABINET 42")
    assert ids(found) == [jobs[42].id]
    assert (found.scanned, found.total, found.exact, found.next_start) == (50, 50, False, None)
    assert ids(queues.search_jobs(text=jobs[7].id[-12:])) == [jobs[7].id]
    assert ids(queues.search_jobs(text="кабинет")) == []
    partial = queues.search_jobs(text="cabinet 1", scan_limit=20)  # newest first: 49..30 scanned
    assert (ids(partial), partial.scanned, partial.next_start) == ([], 20, 20)
    rest = queues.search_jobs(text="cabinet 1", scan_limit=40, start=partial.next_start)
    assert [jobs.index(next(j for j in jobs if j.id == i)) for i in ids(rest)] == [
        19,
        18,
        17,
        16,
        15,
        14,
        13,
        12,
        11,
        10,
        1,
    ]


def test_non_ascii_argument_text_is_found():
    job = queues.enqueue("default", sample.fail, "Кабинет №42")
    queues.enqueue("default", sample.fail, "other")
    assert ids(queues.search_jobs(text="кабинет №42")) == [job.id]


def test_queue_and_state_read_rq_s_own_registry(queue_redis):
    from rq.registry import FailedJobRegistry

    queued = queues.enqueue("default", sample.add, 1, 1)
    failed = queues.enqueue("default", sample.add, 2, 2)
    queue = queues.get_queue("default")
    queue.connection.lrem(keys.queue_key("default"), 0, failed.id)
    failed.set_status("failed")
    FailedJobRegistry(queue=queue).add(failed, ttl=600)
    found = queues.search_jobs(queue="default", state="failed")
    assert (ids(found), found.source) == ([failed.id], "failed jobs of default")
    assert ids(queues.search_jobs(queue="default", state="queued")) == [queued.id]
    assert ids(queues.search_jobs(state="failed")) == [failed.id]  # every queue: the index, checked per job
    assert ids(queues.search_jobs(function="tests.jobs.sample.add", state="queued")) == [queued.id]


def test_a_job_whose_hash_is_gone_is_dropped_from_the_index_the_search_read(admin_redis):
    kept = queues.enqueue("default", sample.add, 1, 1)
    gone = queues.enqueue("default", sample.add, 2, 2)
    admin_redis.delete(keys.job_key(gone.id))
    assert ids(queues.search_jobs(queue="default")) == [kept.id]
    assert admin_redis.zrange(keys.search_queue_key("default"), 0, -1) == [kept.id.encode()]


def test_the_trim_drops_entries_older_than_the_retention_and_keeps_the_rest(admin_redis, queue_redis):
    old = queues.enqueue_call("default", sample.add, (1, 1), meta={"owner": 3})
    new = queues.enqueue_call("default", sample.add, (2, 2), meta={"owner": 3})
    for key in (
        keys.search_queue_key("default"),
        keys.search_owner_key(3),
        keys.search_func_key("tests.jobs.sample.add"),
    ):
        admin_redis.zadd(key, {old.id: 1000.0})
    removed = index.trim(queue_redis, ["default"], now=time.time())
    assert removed == 3
    for key in (
        keys.search_queue_key("default"),
        keys.search_owner_key(3),
        keys.search_func_key("tests.jobs.sample.add"),
    ):
        assert admin_redis.zrange(key, 0, -1) == [new.id.encode()]


@pytest.mark.parametrize(
    "criteria, message",
    [
        ({"state": "done"}, "state must be one of queued, scheduled, held, started"),
        ({"page_size": 500}, "page_size must be at most 100, got 500."),
        ({"start": -1}, "start must be an integer >= 0, got -1."),
        ({"text": "x" * 201}, "text must be at most 200 characters, got 201."),
    ],
)
def test_a_bad_criterion_is_refused_naming_it_and_its_value(criteria, message):
    with pytest.raises(queues.InvalidSearch) as caught:
        queues.search_jobs(**criteria)
    assert message in str(caught.value)


def test_an_unknown_queue_names_the_declared_ones():
    with pytest.raises(queues.UnknownQueue) as caught:
        queues.search_jobs(queue="nope")
    assert "default" in str(caught.value)


@pytest.mark.django_db(transaction=True)
def test_a_worker_s_maintenance_trims_the_index(start_worker, admin_redis):
    old = queues.enqueue("default", sample.add, 1, 1)
    admin_redis.zadd(keys.search_queue_key("default"), {old.id: 1000.0})  # enqueued long before the retention
    worker = start_worker("default", "--no-fork", "--burst")
    assert worker.wait(60) == 0, worker.output()
    assert admin_redis.zscore(keys.search_queue_key("default"), old.id) is None
    assert admin_redis.zscore(keys.search_func_key("tests.jobs.sample.add"), old.id) is not None  # not old there


def test_a_search_of_every_queue_merges_their_indexes_newest_first_and_pages_through_them(admin_redis):
    order = [
        queues.enqueue(name, sample.add, i, i)
        for i, name in enumerate(["default", "content", "default", "repricer", "content"])
    ]
    newest_first = [job.id for job in reversed(order)]
    assert ids(queues.search_jobs()) == newest_first
    first = queues.search_jobs(page_size=2)
    assert (ids(first), first.next_start, first.total) == (newest_first[:2], 2, 5)
    assert ids(queues.search_jobs(page_size=2, start=2)) == newest_first[2:4]
    admin_redis.delete(keys.job_key(order[1].id))
    assert ids(queues.search_jobs()) == [i for i in newest_first if i != order[1].id]
    assert admin_redis.zscore(keys.search_queue_key("content"), order[1].id) is None  # dropped where it was


def test_five_thousand_jobs_in_one_queue_are_searched_by_every_criterion():
    """The shape of bench/search.py's 100,000 (whose timings are there, not here): an exact page at
    any depth, a text among the newest, and a scan that stops at its limit and says so."""
    for start in range(0, 5000, 2500):
        queues.enqueue_many("default", sample.fail, [(f"cabinet-{i}",) for i in range(start, start + 2500)])
    page = queues.search_jobs(queue="default", start=4000, page_size=25)
    assert [h.description for h in page.hits][:1] == ["tests.jobs.sample.fail('cabinet-999')"]
    assert (len(page.hits), page.total, page.scanned) == (25, 5000, 25)
    queued = queues.search_jobs(queue="default", state="queued", start=10)  # rq's list: oldest first
    assert queued.hits[0].description == "tests.jobs.sample.fail('cabinet-10')"
    found = queues.search_jobs(text="cabinet-4321")
    assert [h.description for h in found.hits] == ["tests.jobs.sample.fail('cabinet-4321')"]
    limited = queues.search_jobs(text="cabinet-12", scan_limit=1000)  # 4999..4000: no match among them
    assert (limited.hits, limited.scanned, limited.next_start, limited.total) == ([], 1000, 1000, 5000)
    rest = queues.search_jobs(text="cabinet-12", start=limited.next_start)
    assert [h.description for h in rest.hits][:2] == [
        "tests.jobs.sample.fail('cabinet-1299')",
        "tests.jobs.sample.fail('cabinet-1298')",
    ]
    assert rest.next_start is not None and len(rest.hits) == 25


def test_index_keys_of_another_type_neither_stop_an_enqueue_nor_a_search(admin_redis):
    admin_redis.set(keys.search_queue_key("default"), "planted: a string, not a sorted set")
    admin_redis.set(keys.search_func_key("tests.jobs.sample.add"), "planted")
    job = queues.enqueue("default", sample.add, 1, 2)  # the planted keys are set aside, the job written
    assert queues.search_jobs(queue="default", state="queued").hits[0].job_id == job.id
    assert ids(queues.search_jobs(queue="default")) == [job.id]
    admin_redis.set(keys.search_owner_key(9), "planted")
    assert ids(queues.search_jobs(owner=9)) == []


def test_jobs_with_an_own_id_a_unique_key_a_delay_or_a_limit_key_are_indexed_too():
    own = queues.enqueue("default", sample.add, 1, 1, job_id="own-id-1")  # rq's check-and-write Lua
    unique = queues.enqueue("default", sample.add, 2, 2, unique="the-key")  # our WATCH/MULTI
    delayed = queues.enqueue("default", sample.add, 3, 3, delay=600)
    limited = queues.enqueue("default", sample.add, 4, 4, limit_key="owner:1", limit_concurrency=1)
    assert ids(queues.search_jobs(function="tests.jobs.sample.add")) == [limited.id, delayed.id, unique.id, own.id]
    assert ids(queues.search_jobs(queue="default", state="scheduled")) == [delayed.id]
