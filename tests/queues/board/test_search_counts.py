"""The Search page's counts are honest: how many of the scanned jobs match, and index entries whose job expired
counted apart, never as jobs (queues/board/search.py)."""

import pytest
from django.test import Client
from django.urls import reverse

import queues
from queues.keyspace import keys
from tests.jobs import sample
from tests.support.panel import make_staff


@pytest.fixture
def searcher(django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "searcher", "queues.view_queue_panel"))
    return client


@pytest.mark.django_db(transaction=True)
def test_the_scan_note_says_how_many_match_and_counts_expired_entries_apart(searcher, queue_redis):
    matching = queues.enqueue_many("default", sample.fail, [(f"needle {i}",) for i in range(5)])
    others = queues.enqueue_many("default", sample.fail, [("hay",), ("straw",)])
    queue_redis.delete(*(keys.job_key(job.id) for job in others))  # expired since: their index entries remain
    html = searcher.get(reverse("django_rq:queues_search"), {"q": "needle"}).content.decode()
    assert html.count('class="job-link"') == 5
    assert all(f"/{job.id}/" in html for job in matching)
    assert (
        "Scanned 5 of 5 jobs of every queue (newest first, positions 1-7): 5 match. 2 more entries named a job "
        "that had expired (dropped from the index)." in html
    )
    assert "<p>5 jobs in jobs of every queue (those shown above are the ones that match)." in html


@pytest.mark.django_db(transaction=True)
def test_a_scan_that_matches_some_says_how_many_of_those_scanned(searcher):
    queues.enqueue_many("default", sample.fail, [(f"cabinet {i}",) for i in range(7)])
    html = searcher.get(reverse("django_rq:queues_search"), {"q": "cabinet 3"}).content.decode()
    assert html.count('class="job-link"') == 1
    assert "Scanned 7 of 7 jobs of every queue (newest first, positions 1-7): 1 matches." in html
