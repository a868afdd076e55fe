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
