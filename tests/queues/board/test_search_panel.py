"""The panel's Search page (admin/queues/search/): a person types a text, gets the matching jobs, opens one."""

import pytest
from django.test import Client
from django.urls import reverse
from django_rq.settings import get_queues_map

import queues
from tests.jobs import sample
from tests.support.panel import make_staff


@pytest.fixture
def searcher(django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "searcher", "queues.view_queue_panel"))
    return client


@pytest.mark.django_db(transaction=True)
def test_a_text_search_lists_the_matching_job_and_links_to_its_page(searcher):
    jobs = queues.enqueue_many("default", sample.fail, [(f"cabinet {i}",) for i in range(30)])
    page = searcher.get(reverse("django_rq:queues_search"), {"q": "cabinet 17"})
    assert page.status_code == 200
    html = page.content.decode()
    url = reverse("django_rq:job_detail", args=[get_queues_map()["default"], jobs[17].id])
    assert html.count('class="job-link"') == 1 and f'href="{url}"' in html
    assert "Scanned 30 of 30 jobs of every queue" in html
    assert searcher.get(url).status_code == 200  # the result's link opens the job's page


@pytest.mark.django_db(transaction=True)
def test_pages_follow_each_other_and_a_bad_state_is_named(searcher):
    queues.enqueue_many("default", sample.add, [(i, i) for i in range(30)])
    first = searcher.get(reverse("django_rq:queues_search"), {"queue": "default"}).content.decode()
    assert first.count('class="job-link"') == 25 and 'href="?queue=default&amp;start=25"' in first
    second = searcher.get(reverse("django_rq:queues_search"), {"queue": "default", "start": 25}).content.decode()
    assert second.count('class="job-link"') == 5 and 'id="next-page"' not in second
    bad = searcher.get(reverse("django_rq:queues_search"), {"state": "done"}).content.decode()
    assert "state must be one of queued, scheduled" in bad and "got &#x27;done&#x27;" in bad


@pytest.mark.django_db
def test_the_search_page_needs_the_panel_s_view_permission(prod, django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "nobody"))
    assert client.get(reverse("django_rq:queues_search")).status_code == 403


@pytest.mark.django_db
def test_an_index_list_of_another_type_still_shows_the_page(searcher, admin_redis):
    from queues.keyspace import keys

    admin_redis.set(keys.search_functions_key(), "planted: a string")
    admin_redis.set(keys.search_queue_key("default"), "planted: a string")
    page = searcher.get(reverse("django_rq:queues_search"))
    assert page.status_code == 200 and 'id="no-results"' in page.content.decode()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "start, shown",
    [
        ("9" * 30, "start must be at most 1,000,000,000, got " + "9" * 30),
        ("1000000001", "start must be at most 1,000,000,000, got 1000000001."),
        ("9" * 5000, "start must be at most 1,000,000,000, got &#x27;" + "9" * 20),  # past int()'s 4,300 digits
        ("-3", "start must be an integer &gt;= 0, got -3."),
        ("x", "start must be a whole number, got &#x27;x&#x27;."),
    ],
)
def test_a_start_out_of_range_is_named_with_its_limit_and_logs_no_error(searcher, caplog, start, shown):
    """Issue 32, finding 4 on the panel: a huge start read as an empty page and an ERROR of a corrupt index."""
    import logging

    queues.enqueue("default", sample.add, 1, 1)
    for criteria in ({"start": start}, {"start": start, "q": "x"}, {"start": start, "queue": "default"}):
        page = searcher.get(reverse("django_rq:queues_search"), criteria)
        html = page.content.decode()
        assert page.status_code == 400 and shown in html and 'class="job-link"' not in html
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.django_db(transaction=True)
def test_a_job_planted_in_another_queue_s_index_is_not_listed_there(searcher, admin_redis):
    """Issue 32, finding 2 on the panel: the queue's set vouches for nothing; the job's own queue decides."""
    import time

    from queues.keyspace import keys

    content = queues.enqueue("content", sample.fail, "planted-in-default")
    admin_redis.zadd(keys.search_queue_key("default"), {content.id: time.time() + 60})
    html = searcher.get(reverse("django_rq:queues_search"), {"queue": "default", "q": "planted"}).content.decode()
    assert 'class="job-link"' not in html
    assert "1 more entry named a job that does not belong to this list (dropped from the index)" in html
    assert admin_redis.zscore(keys.search_queue_key("default"), content.id) is None


@pytest.mark.django_db(transaction=True)
def test_the_search_page_finds_the_jobs_of_every_server_and_names_one_that_is_down(searcher, second_redis):
    """Issue 36: a job of server b is found and opens on its page; b stopped, the default server's still are."""
    on_a = queues.enqueue("default", sample.fail, "cabinet 1")
    on_b = queues.enqueue("on-b", sample.fail, "cabinet 2")
    html = searcher.get(reverse("django_rq:queues_search"), {"q": "cabinet"}).content.decode()
    index = get_queues_map()
    urls = [reverse("django_rq:job_detail", args=[index[q], job.id]) for q, job in (("default", on_a), ("on-b", on_b))]
    assert html.count('class="job-link"') == 2 and all(f'href="{url}"' in html for url in urls)
    assert searcher.get(urls[1]).status_code == 200  # b's job's page, read on b
    second_redis.stop()
    page = searcher.get(reverse("django_rq:queues_search"), {"q": "cabinet"})
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('class="job-link"') == 1 and f'href="{urls[0]}"' in html
    assert "Redis server <strong>b</strong> does not answer" in html
