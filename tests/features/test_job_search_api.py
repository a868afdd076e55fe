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


def test_a_job_planted_in_a_user_s_owner_set_is_never_listed_nor_probed_by_q(seller_a, seller_b, admin_redis, caplog):
    """Issue 32, finding 2: ``ZADD ...:search:owner:<id>`` of another's job, and of a staff-only (ownerless) one."""
    import time

    import queues
    from queues.keyspace import keys
    from tests.jobs import sample

    mine = sync(seller_a, 5)
    theirs = sync(seller_b, 6)
    staff_only = queues.enqueue("default", sample.fail, "staff-secret-argument").id
    owner_set = keys.search_owner_key(seller_a.user.pk)
    admin_redis.zadd(owner_set, {theirs: time.time() + 60, staff_only: time.time() + 61})
    assert listed(seller_a, "?q=(6)")["results"] == []  # seller b's cabinet 6: its text is never read
    admin_redis.zadd(owner_set, {theirs: time.time() + 60, staff_only: time.time() + 61})
    assert listed(seller_a, "?q=staff-secret")["results"] == []
    admin_redis.zadd(owner_set, {theirs: time.time() + 60, staff_only: time.time() + 61})
    assert [r["job_id"] for r in listed(seller_a)["results"]] == [mine]
    assert admin_redis.zrange(owner_set, 0, -1) == [mine.encode()]  # dropped from the user's set
    assert seller_a.get(f"/jobs/{theirs}/").status_code == 404
    assert [r["job_id"] for r in listed(seller_b)["results"]] == [theirs]
    dropped = [r for r in caplog.records if r.name == "queues.resilience" and theirs in r.getMessage()]
    assert len(dropped) == 3 and all(owner_set in r.getMessage() for r in dropped)


@pytest.mark.parametrize(
    "query, field, limit",
    [
        ("?page=" + "9" * 30, "page", "10,000,000"),
        ("?start=" + "9" * 30, "start", "1,000,000,000"),
        ("?page=10000001", "page", "10,000,000"),
        ("?start=1000000001", "start", "1,000,000,000"),
        ("?start=" + "9" * 5000, "start", "1,000,000,000"),  # past int()'s 4,300 digits
        ("?page=" + "9" * 30 + "&q=x&state=queued", "page", "10,000,000"),
    ],
)
def test_a_number_out_of_range_answers_400_naming_it_its_value_and_the_limit_and_logs_no_error(
    seller_a, caplog, query, field, limit
):
    """Issue 32, finding 4: it answered 200 ``total: 0`` and logged an ERROR that the owner index was corrupt."""
    import logging

    sync(seller_a, 5)
    response = seller_a.get(f"/jobs/{query}")
    assert response.status_code == 400, response.content
    errors = response.json()["errors"]
    assert [(e["field"], e["messages"]) for e in errors] == [(field, [f"must be at most {limit}"])]
    assert errors[0]["value"].startswith("9") or errors[0]["value"].startswith("1")
    assert f"{field}=" in response.json()["detail"] and limit in response.json()["detail"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_the_last_page_and_start_allowed_answer_200_with_nothing_more(seller_a):
    sync(seller_a, 5)
    for query in ("?page=10000000", "?start=1000000000", "?start=1000000000&q=x"):
        page = listed(seller_a, query)
        assert (page["results"], page["next"]) == ([], None)
