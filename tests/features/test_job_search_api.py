"""``GET /jobs/?function=&queue=&state=&q=&page=``: a caller's own live jobs, newest first (staff with the
queue panel's view permission: every job), through ``queues.search_jobs`` and the owner index."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)

VIEW = "queues.view_queue_panel"
SYNC = "features.orders.jobs.sync_orders"


def sync(client, cabinet_id):
    response = client.post("/features/orders/sync/", {"cabinet_id": cabinet_id}, format="json")
    assert response.status_code == 202, response.content
    return response.json()["job_id"]


def listed(client, query=""):
    response = client.get(f"/jobs/{query}")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def seller_a(api):
    return api.own(cabinets=[5, 15, 25])


@pytest.fixture
def seller_b(make_api):
    return make_api("seller-b").own(cabinets=[6])


def test_a_user_lists_only_their_own_jobs_newest_first_and_staff_list_every_job(seller_a, seller_b, make_api):
    a_jobs = [sync(seller_a, 5), sync(seller_a, 15)]
    b_job = sync(seller_b, 6)
    mine = listed(seller_a)
    assert [r["job_id"] for r in mine["results"]] == a_jobs[::-1]
    assert mine["results"][0] == {
        "job_id": a_jobs[1],
        "queue": "orders-sync",
        "state": "queued",
        "function": mine["results"][0]["function"],
        "enqueued_at": mine["results"][0]["enqueued_at"],
        "status_url": f"/jobs/{a_jobs[1]}/",
    }
    assert (mine["total"], mine["exact"], mine["next"]) == (2, True, None)
    assert [r["job_id"] for r in listed(seller_b)["results"]] == [b_job]
    staff = make_api("operator", staff_perms=[VIEW])
    assert {r["job_id"] for r in listed(staff, "?queue=orders-sync")["results"]} == {*a_jobs, b_job}
    assert [r["job_id"] for r in listed(make_api("nobody"))["results"]] == []


def test_a_text_in_the_arguments_and_a_function_narrow_the_caller_s_jobs(seller_a, seller_b):
    a_jobs = [sync(seller_a, 5), sync(seller_a, 15), sync(seller_a, 25)]
    sync(seller_b, 6)
    found = listed(seller_a, "?q=(15)")  # the call's description, sync_cabinet(15): no hex id holds "("
    assert [r["job_id"] for r in found["results"]] == [a_jobs[1]]
    assert (found["exact"], found["scanned"], found["total"]) == (False, 3, 3)
    function = found["results"][0]["function"]
    # orders-sync lets one owner have 2 jobs queued or running: the third is held by its limit key
    assert [r["job_id"] for r in listed(seller_a, f"?function={function}&state=queued")["results"]] == a_jobs[1::-1]
    assert [r["job_id"] for r in listed(seller_a, f"?function={function}&state=held")["results"]] == a_jobs[2:]
    assert listed(seller_a, "?function=no.such.function")["results"] == []
    assert listed(seller_b, "?q=(15)")["results"] == []  # another's job never shows


def test_pages_follow_next_until_it_is_null(seller_a):
    jobs = [sync(seller_a, cabinet) for cabinet in (5, 15, 25)]
    first = listed(seller_a, "?page_size=2")
    assert [r["job_id"] for r in first["results"]] == jobs[:0:-1]
    assert first["next"].endswith("/jobs/?page_size=2&start=2")
    second = seller_a.get(first["next"]).json()
    assert ([r["job_id"] for r in second["results"]], second["next"]) == ([jobs[0]], None)
    assert [r["job_id"] for r in listed(seller_a, "?page=2&page_size=2")["results"]] == [jobs[0]]


@pytest.mark.parametrize(
    "query, field, message",
    [
        ("?state=done", "state", "state must be one of queued, scheduled"),
        ("?page_size=500", "page_size", "page_size must be at most 100, got 500."),
        ("?page=0", "page", "must be an integer >= 1"),
        ("?queue=nope", "queue", "nope"),
    ],
)
def test_a_bad_parameter_answers_400_naming_it(seller_a, query, field, message):
    response = seller_a.get(f"/jobs/{query}")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [e["field"] for e in errors] == [field] and message in errors[0]["messages"][0]


def test_the_list_needs_authentication_outside_dev():
    from rest_framework.test import APIClient

    assert APIClient().get("/jobs/").status_code == 401


def test_the_schema_documents_the_search_parameters(api):
    schema = api.get("/api/schema/?format=json").json()
    names = {p["name"] for p in schema["paths"]["/jobs/"]["get"]["parameters"]}
    assert {"function", "queue", "state", "q", "page", "page_size", "start"} <= names
