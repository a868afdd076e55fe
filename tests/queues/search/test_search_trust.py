"""The search index is a hint, the job is the truth (issue 32, findings 2 and 4): an id planted in an owner's,
a function's or a queue's set is checked against the job's own owner, function and queue before it is shown
or its text matched, and dropped from the set; out-of-range numbers are refused, never read as corruption."""

import logging
import time

import pytest

import queues
from queues.keyspace import entries, keys
from queues.search import find, index
from tests.jobs import sample


@pytest.fixture(autouse=True)
def _refresh_after_flush():
    index._refreshed.clear()  # the prefix is flushed between tests: this process's refreshes are stale


def ids(found):
    return [hit.job_id for hit in found.hits]


def warnings_naming(caplog, *job_ids):
    return [r for r in caplog.records if r.levelno == logging.WARNING and all(i in r.getMessage() for i in job_ids)]


def plant(redis, key, job_id):
    redis.zadd(key, {job_id: time.time() + 60})  # newest: first in the owner's list


def test_another_owner_s_job_planted_in_an_owner_s_set_is_never_shown_nor_its_text_matched(admin_redis, caplog):
    mine = queues.enqueue_call("default", sample.fail, ("cabinet 5",), meta={"owner": 7})
    theirs = queues.enqueue_call("default", sample.fail, ("secret-of-owner-8",), meta={"owner": 8})
    staff_only = queues.enqueue("default", sample.fail, "secret-of-staff")  # no owner: staff only
    as_text = queues.enqueue_call("default", sample.fail, ("secret-of-owner-70",), meta={"owner": "70"})
    for job in (theirs, staff_only, as_text):
        plant(admin_redis, keys.search_owner_key(7), job.id)
    assert ids(queues.search_jobs(owner=7, text="secret")) == []  # the text of the planted ones is never read
    assert ids(queues.search_jobs(owner=7)) == [mine.id]
    assert admin_redis.zrange(keys.search_owner_key(7), 0, -1) == [mine.id.encode()]  # dropped from the index
    assert len(warnings_naming(caplog, theirs.id, staff_only.id, as_text.id, keys.search_owner_key(7))) == 1
    assert ids(queues.search_jobs(owner=8)) == [theirs.id]  # the real entries stay
    assert ids(queues.search_jobs(queue="default", text="secret-of-staff")) == [staff_only.id]


def test_an_owner_is_matched_whether_it_was_given_as_a_number_or_as_its_text(admin_redis):
    job = queues.enqueue_call("default", sample.add, (1, 2), meta={"owner": 7})
    assert ids(queues.search_jobs(owner=7)) == ids(queues.search_jobs(owner="7")) == [job.id]
    assert admin_redis.zcard(keys.search_owner_key(7)) == 1


def test_a_job_planted_in_another_function_s_set_is_dropped_and_the_real_one_kept(admin_redis, caplog):
    add = queues.enqueue("default", sample.add, 1, 2)
    fail = queues.enqueue("default", sample.fail, "boom")
    plant(admin_redis, keys.search_func_key("tests.jobs.sample.fail"), add.id)
    plant(admin_redis, keys.search_func_key("tests.jobs.sample.fail"), "no-such-job-hash-either")
    assert ids(queues.search_jobs(function="tests.jobs.sample.fail")) == [fail.id]
    assert admin_redis.zrange(keys.search_func_key("tests.jobs.sample.fail"), 0, -1) == [fail.id.encode()]
    assert len(warnings_naming(caplog, add.id, "tests.jobs.sample.add")) == 1
    assert ids(queues.search_jobs(function="tests.jobs.sample.add")) == [add.id]


def test_a_job_planted_in_another_queue_s_set_is_dropped_and_shown_once_where_it_lives(admin_redis, caplog):
    content = queues.enqueue("content", sample.add, 1, 2)
    default = queues.enqueue("default", sample.add, 3, 4)
    plant(admin_redis, keys.search_queue_key("default"), content.id)
    assert ids(queues.search_jobs()) == [default.id, content.id]  # every queue: once, from its own set
    assert admin_redis.zscore(keys.search_queue_key("default"), content.id) is None
    assert len(warnings_naming(caplog, content.id, keys.search_queue_key("default"))) == 1
    plant(admin_redis, keys.search_queue_key("default"), content.id)
    assert ids(queues.search_jobs(queue="default")) == [default.id]
    assert ids(queues.search_jobs(queue="content")) == [content.id]


def test_a_job_key_of_another_type_in_an_owner_s_set_is_not_shown(admin_redis):
    admin_redis.set(keys.job_key("planted-string"), "not a hash")
    plant(admin_redis, keys.search_owner_key(7), "planted-string")
    admin_redis.hset(keys.job_key("planted-bad-meta"), mapping={"status": "queued", "origin": "default", "meta": "{"})
    plant(admin_redis, keys.search_owner_key(7), "planted-bad-meta")
    assert ids(queues.search_jobs(owner=7)) == []
    assert admin_redis.zcard(keys.search_owner_key(7)) == 0


def test_pages_after_dropped_entries_skip_no_job(admin_redis):
    jobs = queues.enqueue_many("default", sample.add, [(i, i) for i in range(6)], meta={"owner": 7})
    other = queues.enqueue_call("default", sample.add, (9, 9), meta={"owner": 8})
    for _ in range(3):
        admin_redis.zadd(keys.search_owner_key(7), {other.id: time.time() + 60})
    first = queues.search_jobs(owner=7, page_size=3)
    assert ids(first) == [j.id for j in reversed(jobs)][:2]
    second = queues.search_jobs(owner=7, page_size=3, start=first.next_start)
    assert ids(second) == [j.id for j in reversed(jobs)][2:5]


@pytest.mark.parametrize("start", [10**30 - 1, find.MAX_START + 1])
def test_a_start_past_the_limit_is_refused_naming_it_and_the_limit(start, caplog):
    with pytest.raises(queues.InvalidSearch) as caught:
        queues.search_jobs(owner=7, start=start)
    assert str(caught.value) == f"start must be at most {find.MAX_START:,}, got {start}."
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_the_largest_start_allowed_answers_an_empty_page_without_an_error(caplog):
    queues.enqueue_call("default", sample.add, (1, 2), meta={"owner": 7})
    for criteria in ({"owner": 7}, {}, {"queue": "default", "state": "queued"}, {"text": "x"}):
        found = queues.search_jobs(**criteria, start=find.MAX_START)
        assert (found.hits, found.next_start) == ([], None)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_only_a_real_wrong_type_is_reported_as_corruption(admin_redis, caplog, monkeypatch):
    monkeypatch.setattr(entries, "_reported", set())  # reported once per process: this test's own
    admin_redis.set(keys.search_owner_key(7), "planted")
    assert queues.search_jobs(owner=7).hits == []
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"bad entry in Redis: {keys.search_owner_key(7)}: is not a sorted set: searched as empty; skipped "
        "(shown as corrupt or left out)"
    ]


def test_a_job_of_another_queue_in_a_queue_s_own_list_is_not_listed_there_and_the_list_left_alone(admin_redis):
    content = queues.enqueue("content", sample.add, 1, 2)
    default = queues.enqueue("default", sample.add, 3, 4)
    admin_redis.rpush(keys.queue_key("default"), content.id)  # rq's list: the workers' business, not the search's
    found = queues.search_jobs(queue="default", state="queued")
    assert (ids(found), found.misplaced) == ([default.id], 0)
    assert admin_redis.lrange(keys.queue_key("default"), 0, -1) == [default.id.encode(), content.id.encode()]
