"""The Search page keeps the panel's budget (issue 33 §4): at most 5 Redis round trips whatever it scans —
the whole scan's hashes in one pipeline, expired and misplaced index entries dropped in one more — and a scan
of at most ``SCAN_LIMIT`` jobs a page (queues/board/search.py), continued by "Load more"."""

from urllib.parse import urlencode

import pytest
from django.urls import reverse

import queues
from queues.board import search as board_search
from queues.keyspace import keys
from queues.search import find
from tests.jobs import sample

JOBS = 2500  # more than one scan (2,000) and than one old HMGET chunk (1,000)


@pytest.fixture
def crowd():
    return queues.enqueue_many("default", sample.fail, [(f"cabinet {i}",) for i in range(JOBS)])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("criteria", "source"),
    [
        ({}, "jobs of every queue"),
        ({"queue": "default"}, "jobs of queue default"),
        ({"queue": "default", "state": "queued"}, "queued jobs of default"),
        ({"function": "tests.jobs.sample.fail"}, "jobs of tests.jobs.sample.fail"),
    ],
)
def test_a_text_no_job_holds_scans_one_page_in_at_most_5_round_trips(client, round_trips, crowd, criteria, source):
    response = round_trips.get(client, reverse("django_rq:queues_search") + "?" + _query(q="кабинет 7", **criteria))
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    assert round_trips.sent.count(b"HMGET") == 1  # every scanned job's hash, in one pipeline
    html = response.content.decode()
    assert 'id="no-results"' in html and "Text is looked for in at most 2,000 jobs per page." in html
    assert f"Scanned 2,000 of 2,500 {source} (newest first, positions 1-2,000): 0 match." in html
    assert "start=2000" in html  # "Load more" continues the scan where it stopped


@pytest.mark.django_db(transaction=True)
def test_expired_and_misplaced_entries_are_dropped_within_the_same_5_round_trips(
    client, round_trips, crowd, queue_redis
):
    expired = crowd[-300:]  # the newest: within the page's scan
    queue_redis.delete(*(keys.job_key(job.id) for job in expired))
    elsewhere = queues.enqueue("content", sample.fail, "planted")
    planted_score = queue_redis.zscore(keys.search_queue_key("default"), crowd[-1].id) + 1
    queue_redis.zadd(keys.search_queue_key("default"), {elsewhere.id: planted_score})
    response = round_trips.get(client, reverse("django_rq:queues_search") + "?" + _query(q="no such text"))
    assert response.status_code == 200
    assert round_trips.count <= 5, round_trips.sent
    html = response.content.decode()
    assert "300 more entries named a job that had expired (dropped from the index)." in html
    assert "1 more entry named a job that does not belong to this list (dropped from the index)." in html
    index = queue_redis.zrange(keys.search_queue_key("default"), 0, -1)
    assert len(index) == JOBS - 300 and elsewhere.id.encode() not in index
    assert queue_redis.zscore(keys.search_queue_key("content"), elsewhere.id) is not None  # its own entry stays


@pytest.mark.django_db(transaction=True)
def test_load_more_finds_a_text_beyond_the_first_scan(client, crowd):
    url = reverse("django_rq:queues_search")
    first = client.get(url + "?" + _query(q="CABINET 49")).content.decode()
    assert 'class="job-link"' not in first and "start=2000" in first  # 49 and 490-499: among the 500 oldest
    more = client.get(url + "?" + _query(q="CABINET 49", start=2000)).content.decode()
    shown = {job.id for job in crowd if f"/{job.id}/" in more}
    assert shown == {crowd[i].id for i in (49, *range(490, 500))}
    assert 'id="next-page"' not in more


def test_the_panel_scans_less_than_a_code_caller():
    assert board_search.SCAN_LIMIT == 2000 < find.SCAN_LIMIT


def _query(**params):
    return urlencode(params)
