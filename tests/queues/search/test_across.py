"""``queues.search_jobs`` over two real redis-servers (queues/search/across.py, issue 36): the default server's
queues and server b's (``second_redis``: ``on-b``, ``on-b-2``), each with its own index."""

import pytest

import queues
from queues.search import index
from tests.jobs import sample


@pytest.fixture(autouse=True)
def _refresh_after_flush():
    index._refreshed.clear()  # the prefix is flushed between tests: this process's refreshes are stale


def ids(found):
    return [hit.job_id for hit in found.hits]


def test_a_search_without_a_queue_finds_the_jobs_of_both_servers_each_newest_first(second_redis):
    a1 = queues.enqueue("default", sample.add, 1, 2)
    a2 = queues.enqueue("default", sample.add, 3, 4)
    b1 = queues.enqueue("on-b", sample.add, 5, 6)
    b2 = queues.enqueue("on-b-2", sample.fail, "boom")
    found = queues.search_jobs()
    assert ids(found) == [a2.id, a1.id, b2.id, b1.id]  # the default server's, then b's
    assert (found.total, found.next_start, found.servers_down) == (4, None, [])
    assert ids(queues.search_jobs(function="tests.jobs.sample.add")) == [a2.id, a1.id, b1.id]
    assert ids(queues.search_jobs(text="boom")) == [b2.id]
    assert ids(queues.search_jobs(queue="on-b")) == [b1.id]  # the queue's own server only
    assert [(h.queue, h.state) for h in queues.search_jobs(queue="on-b-2").hits] == [("on-b-2", "queued")]


def test_paging_runs_through_both_servers_end_to_end_showing_each_job_once(second_redis):
    on_a = [queues.enqueue("default", sample.add, i, 0).id for i in range(3)]
    on_b = [queues.enqueue("on-b", sample.add, i, 1).id for i in range(4)]
    for criteria in ({}, {"text": "add"}):  # an exact source, then a scan
        seen, start, pages = [], 0, 0
        while start is not None:
            found = queues.search_jobs(page_size=2, start=start, **criteria)
            seen += ids(found)
            start, pages = found.next_start, pages + 1
        assert seen == [*reversed(on_a), *reversed(on_b)], criteria
        assert pages in (4, 5)  # 7 jobs, 2 a page; a page may end where a server does


def test_a_server_down_is_passed_over_and_named_the_others_jobs_still_found(second_redis):
    a1 = queues.enqueue("default", sample.add, 1, 2)
    queues.enqueue("on-b", sample.add, 5, 6)
    second_redis.stop()
    found = queues.search_jobs()
    assert (ids(found), found.servers_down) == ([a1.id], ["b"])
    with pytest.raises(queues.QueueUnavailable, match=f"127.0.0.1:{second_redis.port}"):
        queues.search_jobs(queue="on-b")
