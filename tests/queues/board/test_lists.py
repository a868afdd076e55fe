"""Issue 33, "lists": the queue page and its job lists are ours (queues/board/lists/): the same URLs and
names as django-rq's, the same data, and at most 5 Redis round trips per page whatever its size (django-rq's
failed list asked every job its status: ~110 for 100 jobs). Django test client, real Redis."""

import re
from html import unescape

import pytest
import redis.connection
from django.test import Client
from django.utils import timezone
from rq.job import JobStatus
from rq.registry import (
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
)

from queues import conf
from queues.catalog.lookup import get_queue
from queues.jobs import execution as execution_record
from queues.jobs import read as jobread
from queues.jobs.execution import Execution
from queues.keyspace import keys

pytestmark = pytest.mark.django_db

DEFAULT = 1  # django-rq's index of "default" (queues sorted by name)
PANEL = "/admin/queues/queues"
FUNC = "tests.jobs.sample.add"

LISTS = {  # state -> (URL path under the queue, rq's status of its jobs, registry)
    "queued": ("", JobStatus.QUEUED, None),
    "started": ("started/", JobStatus.STARTED, None),
    "deferred": ("deferred/", JobStatus.DEFERRED, DeferredJobRegistry),
    "finished": ("finished/", JobStatus.FINISHED, FinishedJobRegistry),
    "failed": ("failed/", JobStatus.FAILED, FailedJobRegistry),
    "scheduled": ("scheduled/", JobStatus.SCHEDULED, ScheduledJobRegistry),
    "canceled": ("canceled/", JobStatus.CANCELED, CanceledJobRegistry),
}


@pytest.fixture
def client(settings):
    settings.OPTIMA_ENV = "dev"
    return Client()


@pytest.fixture
def round_trips(monkeypatch):
    """Counts the sends to Redis (one per command, one per pipeline) made inside ``round_trips.get``; the
    handshake of a new connection (HELLO, CLIENT SETINFO: the panel's client is the request's own,
    ``bounded``) is counted apart, in ``handshake``: it is the connection's, not the page's."""
    original_send = redis.connection.AbstractConnection.send_packed_command
    original_connect = redis.connection.AbstractConnection.connect
    counter = {"on": False, "connecting": False, "sent": 0, "handshake": 0}

    def counted(self, command, check_health=True):
        if counter["on"]:
            counter["handshake" if counter["connecting"] else "sent"] += 1
        return original_send(self, command, check_health)

    def connect(self, *args, **kwargs):
        counter["connecting"] = True
        try:
            return original_connect(self, *args, **kwargs)
        finally:
            counter["connecting"] = False

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    monkeypatch.setattr(redis.connection.AbstractConnection, "connect", connect)

    class Counter:
        sent = handshake = 0

        @staticmethod
        def get(client, url, **kwargs):
            counter.update(on=True, sent=0, handshake=0)
            try:
                response = client.get(url, **kwargs)
            finally:
                counter["on"] = False
            Counter.sent, Counter.handshake = counter["sent"], counter["handshake"]
            return response

    return Counter


def plant(state, count, queue_name="default", start=0, func=FUNC):
    """``count`` jobs of ``queue_name`` in ``state``, as a worker or the producer leaves them; the first one
    is the oldest (scores and list order). Returns their ids, oldest first."""
    queue = get_queue(queue_name)
    connection = queue.connection
    ids = []
    now = timezone.now().timestamp()
    with connection.pipeline() as pipe:
        for n in range(count):
            job = queue.create_job(func, args=[n, 1], meta={"queue": queue_name}, job_id=f"{state}-{start + n:04d}")
            job.origin = queue_name
            job._status = LISTS[state][1]
            if state == "started":
                job.started_at = job.last_heartbeat = timezone.now()
            if state in ("finished", "failed"):
                job.ended_at = timezone.now()
            job.save(pipeline=pipe)
            ids.append(job.id)
            if state == "queued":
                pipe.rpush(queue.key, job.id)
            elif state == "started":
                execution = Execution.create(job, 3600, pipeline=pipe, worker_name="lists-worker")
                execution_record.named_into(job, execution, pipe)
            else:
                # as rq scores them: an expiry (or a run time) ahead; a score already past would be cleaned by
                # rq's own reads (registry.get_job_ids) as the test's clock passes it
                pipe.zadd(LISTS[state][2](queue=queue).key, {job.id: now + 3600 + n})
        pipe.execute()
    return ids


def listed(html):
    return re.findall(rf'<th[^>]*><a href="{PANEL}/{DEFAULT}/([^/"]+)/">', html)


# --- the lists ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", list(LISTS))
def test_a_page_of_100_jobs_of_every_list_costs_at_most_5_round_trips(client, queue_redis, round_trips, state):
    ids = plant(state, 120)
    response = round_trips.get(client, f"{PANEL}/{DEFAULT}/{LISTS[state][0]}")
    html = response.content.decode()
    assert response.status_code == 200
    assert round_trips.sent <= 5, f"{state}: {round_trips.sent} round trips"
    shown = listed(html)
    assert len(shown) == 100
    assert "120 jobs" in html
    # Sorted sets newest first (django-rq's default); the queue in the order workers take it.
    assert shown[0] == (ids[0] if state in ("queued",) else ids[-1]) or state == "started"
    assert html.count(f">{LISTS[state][1].value if state != 'queued' else 'queued'}</td>") == 100
    assert 'id="queue-tabs"' in html and f'id="tab-{state}"' in html


def test_the_failed_list_keeps_its_actions_and_queue_wide_links(client, queue_redis):
    plant("failed", 3)
    html = client.get(f"{PANEL}/{DEFAULT}/failed/").content.decode()
    assert f'<form id="changelist-form" action="{PANEL}/confirm-action/{DEFAULT}/" method="post">' in html
    assert '<option value="requeue">Requeue</option>' in html and '<option value="delete">Delete</option>' in html
    assert f'href="{PANEL}/{DEFAULT}/requeue-all/"' in html
    assert f'href="{PANEL}/{DEFAULT}/failed/clear/"' in html
    assert html.count('name="_selected_action"') == 3
    queued = client.get(f"{PANEL}/{DEFAULT}/").content.decode()
    assert f'href="{PANEL}/{DEFAULT}/empty/"' in queued
    started = client.get(f"{PANEL}/{DEFAULT}/started/").content.decode()
    assert '<option value="stop">Stop</option>' in started


def test_pages_per_page_and_order(client, queue_redis):
    ids = plant("failed", 30)
    first = listed(client.get(f"{PANEL}/{DEFAULT}/failed/?per_page=25").content.decode())
    assert first == list(reversed(ids))[:25]
    second = listed(client.get(f"{PANEL}/{DEFAULT}/failed/?per_page=25&page=2").content.decode())
    assert second == list(reversed(ids))[25:]
    oldest = listed(client.get(f"{PANEL}/{DEFAULT}/failed/?order=oldest&per_page=25").content.decode())
    assert oldest == ids[:25]
    # Not a choice, not a number, past the end: the default, clamped.
    assert len(listed(client.get(f"{PANEL}/{DEFAULT}/failed/?per_page=7&page=x").content.decode())) == 30
    assert listed(client.get(f"{PANEL}/{DEFAULT}/failed/?per_page=25&page=99").content.decode()) == second


def test_the_queued_list_reads_across_the_priority_bands_in_pop_order(client, queue_redis):
    normal = plant("queued", 3)
    queue = get_queue("default")
    high = plant("queued", 2, start=100)
    for job_id in high:  # moved to the high band
        queue_redis.lrem(queue.key, 0, job_id)
        queue_redis.rpush(keys.band_keys(queue.key)[0], job_id)
    html = client.get(f"{PANEL}/{DEFAULT}/?per_page=25").content.decode()
    assert listed(html) == high + normal
    assert '<span class="queue-band" data-band="high">high 2</span>' in html
    assert '<span class="queue-band" data-band="normal">normal 3</span>' in html


def test_a_corrupt_job_is_listed_as_corrupt_and_a_gone_one_is_left_out(client, queue_redis):
    ids = plant("failed", 2)
    queue_redis.hset(jobread.job_key(ids[0]), "data", b"not a payload")
    queue_redis.zadd(FailedJobRegistry(queue=get_queue("default")).key, {"gone-job": 1})
    html = client.get(f"{PANEL}/{DEFAULT}/failed/").content.decode()
    assert "corrupt: data is not a JSON job payload" in html
    assert "gone-job" not in html
    assert sorted(listed(html)) == sorted(ids)


def test_a_registry_of_the_wrong_type_reads_as_empty(client, queue_redis):
    key = FailedJobRegistry(queue=get_queue("default")).key
    queue_redis.set(key, "planted")
    response = client.get(f"{PANEL}/{DEFAULT}/failed/")
    assert response.status_code == 200
    assert "No failed jobs." in response.content.decode()
    assert queue_redis.get(key) == b"planted"


def test_a_get_of_a_list_writes_nothing(client, queue_redis):
    plant("failed", 2)
    plant("started", 2)
    before = {k: queue_redis.dump(k) for k in queue_redis.scan_iter(f"{conf.prefix()}:*")}
    for state in LISTS:
        assert client.get(f"{PANEL}/{DEFAULT}/{LISTS[state][0]}").status_code == 200
    assert client.get(f"{PANEL}/{DEFAULT}/details/").status_code == 200
    after = {k: queue_redis.dump(k) for k in queue_redis.scan_iter(f"{conf.prefix()}:*")}
    assert after == before


# --- the queue page -----------------------------------------------------------------------------------------


def test_the_queue_page_counts_every_state_in_at_most_5_round_trips(client, queue_redis, round_trips):
    from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler

    for state in LISTS:
        plant(state, 100)
    queue_redis.set(RQScheduler.get_locking_key("default"), "worker-7")  # what rq's scheduler writes
    queue_redis.hset(SCHEDULER_KEY_TEMPLATE % "worker-7", "pid", 4242)
    response = round_trips.get(client, f"{PANEL}/{DEFAULT}/details/")
    html = response.content.decode()
    assert response.status_code == 200
    assert round_trips.sent <= 5, round_trips.sent
    for state, (path, _, _) in LISTS.items():
        assert re.search(rf'<a href="{PANEL}/{DEFAULT}/{path}"[^>]*>100</a>', html), state
    assert f'<a href="{PANEL}/{DEFAULT}/canceled/" id="canceled-jobs">100</a>' in html
    assert '<span class="queue-band" data-band="normal">normal 100</span>' in html
    assert 'id="scheduler-pid">4242<' in html
    assert 'id="held-jobs"' in html
    assert f'href="{PANEL}/{DEFAULT}/queued-0000/"' in html and f'href="{PANEL}/{DEFAULT}/queued-0099/"' in html


# --- confirmations ------------------------------------------------------------------------------------------


def test_the_bulk_confirmation_lists_the_jobs_and_posts_the_found_ones_to_the_actions(client, queue_redis):
    ids = plant("failed", 2)
    response = client.post(
        f"{PANEL}/confirm-action/{DEFAULT}/", {"action": "requeue", "_selected_action": [*ids, "missing-job"]}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Are you sure you want to <b>Requeue</b> the following jobs" in html
    assert f'<form action="{PANEL}/actions/{DEFAULT}/" method="post" id="confirm-form">' in html
    assert [i for i in ids if f'<input type="hidden" name="job_ids" value="{i}">' in html] == ids
    assert 'name="job_ids" value="missing-job"' not in html and "(no longer available)" in html
    assert 'value="Requeue 2 jobs"' in html
    assert FailedJobRegistry(queue=get_queue("default")).get_job_ids() == ids  # nothing done yet


def test_the_bulk_confirmation_without_a_job_goes_back_to_the_list(client, queue_redis):
    response = client.post(f"{PANEL}/confirm-action/{DEFAULT}/", {"action": "delete"})
    assert response.status_code == 302 and response["Location"] == f"{PANEL}/{DEFAULT}/"


def test_the_queue_wide_confirmations_are_ours_and_count_the_jobs(client, queue_redis):
    plant("failed", 3)
    html = client.get(f"{PANEL}/{DEFAULT}/requeue-all/").content.decode()
    assert "Are you sure you want to requeue 3 jobs in the" in html
    html = client.get(f"{PANEL}/{DEFAULT}/failed/clear/").content.decode()
    assert "Are you sure you want to delete 3 failed jobs in the" in html
    html = client.get(f"{PANEL}/{DEFAULT}/empty/").content.decode()
    assert "Are you sure you want to clear the queue" in html


def test_empty_queue_empties_every_band(client, queue_redis):
    plant("queued", 3)
    response = client.post(f"{PANEL}/{DEFAULT}/empty/")
    assert response.status_code == 302 and response["Location"] == f"{PANEL}/{DEFAULT}/"
    assert get_queue("default").count == 0


# --- live lists: the JSON view, filters, order, select across (issue 33, helper "live") ----------------------


@pytest.mark.parametrize("state", list(LISTS))
def test_the_json_of_every_list_answers_the_pages_rows_and_counts_in_at_most_5_round_trips(
    client, queue_redis, round_trips, state
):
    ids = plant(state, 120)
    plant("failed", 2, start=500)
    response = round_trips.get(client, f"{PANEL}/{DEFAULT}/{LISTS[state][0]}?format=json&per_page=25")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert round_trips.sent <= 5, f"{state}: {round_trips.sent} round trips"
    data = response.json()
    expected = 122 if state == "failed" else 120
    assert data["state"] == state and data["num_jobs"] == expected and data["per_page"] == 25
    assert data["counts"]["failed"] == (122 if state == "failed" else 2)
    assert data["counts"][state] == expected
    if state != "failed":
        assert len(data["rows"]) == 25 and {row["id"] for row in data["rows"]} <= set(ids)
        assert {row["function"] for row in data["rows"]} == {FUNC}
    # The regions live.js swaps, drawn by the page's own partials: the rows, the pages, the tab counts.
    assert data["html"]["rows"].count('name="_selected_action"') == 25
    assert f'<span class="queue-tab-count">{data["counts"][state]}</span>' in data["html"]["tabs"]
    assert "format=json" not in data["html"]["pager"] and "page=2" in data["html"]["pager"]


def test_a_list_page_carries_its_json_url_and_the_live_toggle(client, queue_redis, settings):
    plant("failed", 3)
    html = client.get(f"{PANEL}/{DEFAULT}/failed/?func=add").content.decode()
    assert 'id="live-toggle"' in html and 'data-refresh-seconds="5"' in html
    assert 'data-live-url="?func=add&amp;format=json"' in html
    assert "queues/live.js" in html and 'data-live="rows"' in html
    # The home and queue pages poll themselves (live.js cuts the same regions from the page).
    home = client.get("/admin/queues/").content.decode()
    assert 'data-live-url="/admin/queues/"' in home
    assert 'data-live="queue-states"' in home and 'data-live="per-state"' in home
    details = client.get(f"{PANEL}/{DEFAULT}/details/").content.decode()
    assert f'data-live-url="{PANEL}/{DEFAULT}/details/"' in details and 'data-live="counts"' in details
    settings.QUEUE_BOARD_REFRESH_SECONDS = 0  # off: no toggle, nothing polls
    for path in (f"{PANEL}/{DEFAULT}/failed/", "/admin/queues/", f"{PANEL}/{DEFAULT}/details/"):
        html = client.get(path).content.decode()
        assert 'id="live-toggle"' not in html and "data-live-url" not in html, path


def test_the_function_filter_lists_only_the_matching_jobs_and_is_kept_across_pages(client, queue_redis, round_trips):
    adds = plant("failed", 30)
    fails = plant("failed", 5, start=100, func="tests.jobs.sample.fail")
    response = round_trips.get(client, f"{PANEL}/{DEFAULT}/failed/?func=Sample.ADD&per_page=25")
    html = response.content.decode()
    assert round_trips.sent <= 5, round_trips.sent
    assert listed(html) == list(reversed(adds))[:25]  # newest first, case-insensitive
    assert "30 jobs whose function contains “Sample.ADD”" in html
    assert 'href="?func=Sample.ADD&amp;per_page=25&amp;page=2"' in html
    assert 'value="Sample.ADD"' in html  # the filter box shows it
    second = client.get(f"{PANEL}/{DEFAULT}/failed/?func=Sample.ADD&per_page=25&page=2").content.decode()
    assert listed(second) == list(reversed(adds))[25:]
    oldest = client.get(f"{PANEL}/{DEFAULT}/failed/?func=fail&order=oldest").content.decode()
    assert listed(oldest) == fails
    data = client.get(f"{PANEL}/{DEFAULT}/failed/?func=fail&format=json").json()
    assert [row["id"] for row in data["rows"]] == list(reversed(fails))
    assert (data["func"], data["num_jobs"], data["counts"]["failed"]) == ("fail", 5, 35)
    none = client.get(f"{PANEL}/{DEFAULT}/failed/?func=nosuchjob").content.decode()
    assert listed(none) == [] and "No failed jobs whose function contains “nosuchjob”." in none


def test_the_queued_list_reads_newest_first_on_request(client, queue_redis):
    normal = plant("queued", 3)
    queue = get_queue("default")
    high = plant("queued", 2, start=100)
    for job_id in high:
        queue_redis.lrem(queue.key, 0, job_id)
        queue_redis.rpush(keys.band_keys(queue.key)[0], job_id)
    assert listed(client.get(f"{PANEL}/{DEFAULT}/?order=newest").content.decode()) == list(reversed(high + normal))
    page2 = client.get(f"{PANEL}/{DEFAULT}/?order=newest&per_page=25").content.decode()
    assert listed(page2) == list(reversed(high + normal))
    many = plant("queued", 40, start=200)
    second = client.get(f"{PANEL}/{DEFAULT}/?order=newest&per_page=25&page=2").content.decode()
    assert listed(second) == list(reversed(high + normal + many))[25:]


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ("func=orders%20sync!", "func", "part of a function's dotted path"),
        ("order=sideways", "order", "use order=newest or order=oldest"),
        ("func=" + "a" * 201, "func", "at most 200 characters"),
    ],
)
def test_a_filter_that_cannot_be_used_is_answered_with_the_field_the_value_and_the_fix(
    client, queue_redis, query, field, words
):
    plant("failed", 2)
    response = client.get(f"{PANEL}/{DEFAULT}/failed/?{query}")
    html = response.content.decode()
    assert response.status_code == 400
    error = unescape(re.search(r'<p class="errornote" id="filter-error" role="alert">([^<]*)</p>', html).group(1))
    assert error.startswith(f"{field}=") and "cannot be used" in error and words in error
    assert listed(html) == []  # no list under a filter that was not applied
    assert 'id="list-filter-clear"' in html
    data = client.get(f"{PANEL}/{DEFAULT}/failed/?{query}&format=json")
    assert data.status_code == 400 and data.json()["field"] == field and words in data.json()["error"]


def test_select_across_is_offered_only_when_the_list_holds_more_than_the_page(client, queue_redis):
    plant("failed", 30)
    html = client.get(f"{PANEL}/{DEFAULT}/failed/?per_page=25").content.decode()
    assert '<a href="#" id="select-across" role="button">Select all 30 jobs in failed</a>' in html
    assert '<input type="hidden" name="select_across" value="0" id="select-across-input">' in html
    assert '<input type="hidden" name="state" value="failed">' in html
    filtered = client.get(f"{PANEL}/{DEFAULT}/failed/?per_page=25&func=add").content.decode()
    assert "Select all 30 jobs in failed whose function contains “add”" in filtered
    assert '<input type="hidden" name="func" value="add">' in filtered
    whole = client.get(f"{PANEL}/{DEFAULT}/failed/").content.decode()  # 30 of 100 per page: nothing across
    assert 'id="select-across"' not in whole


def test_the_confirmation_of_select_across_states_the_count_and_posts_the_state_and_filter(client, queue_redis):
    plant("failed", 30)
    plant("failed", 4, start=100, func="tests.jobs.sample.fail")
    response = client.post(
        f"{PANEL}/confirm-action/{DEFAULT}/",
        {"action": "requeue", "select_across": "1", "state": "failed", "func": "sample.fail", "_selected_action": []},
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "Are you sure you want to <b>Requeue</b> all 4 jobs in failed whose function contains “sample.fail”" in html
    assert f'<form action="{PANEL}/actions/{DEFAULT}/" method="post" id="confirm-form">' in html
    for name, value in (("select_across", "1"), ("state", "failed"), ("func", "sample.fail"), ("action", "requeue")):
        assert f'<input type="hidden" name="{name}" value="{value}">' in html, name
    assert 'name="job_ids"' not in html
    assert 'value="Requeue all 4 jobs in failed"' in html
    unfiltered = client.post(
        f"{PANEL}/confirm-action/{DEFAULT}/", {"action": "delete", "select_across": "1", "state": "failed"}
    ).content.decode()
    assert "all 34 jobs in failed from" in unfiltered and '<input type="hidden" name="func" value="">' in unfiltered
    # Nothing done yet (ZCARD: rq's get_job_ids() would first clean up entries whose score is past).
    assert queue_redis.zcard(FailedJobRegistry(queue=get_queue("default")).key) == 34


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"state": "sideways", "action": "delete"}, "state='sideways' cannot be used"),
        ({"state": "queued", "action": "requeue"}, "action='requeue' cannot be used on queued jobs"),
        ({"state": "failed", "action": "delete", "func": "a b"}, "func='a b' cannot be used"),
    ],
)
def test_a_select_across_it_cannot_use_goes_back_to_the_list_saying_why(client, queue_redis, fields, words):
    response = client.post(f"{PANEL}/confirm-action/{DEFAULT}/", {"select_across": "1", **fields})
    assert response.status_code == 302 and response["Location"] == f"{PANEL}/{DEFAULT}/"
    page = unescape(client.get(response["Location"]).content.decode())
    assert words.capitalize() in page  # the admin's message list capitalises it


def test_the_refresh_setting_is_checked(settings):
    from django.core.checks import Error, run_checks

    for good in (0, 5, 3600):
        settings.QUEUE_BOARD_REFRESH_SECONDS = good
        assert [m for m in run_checks() if m.id == "queues.E029"] == []
    settings.QUEUE_BOARD_REFRESH_SECONDS = "5"
    assert [m for m in run_checks() if m.id == "queues.E029"] == [
        Error(
            "QUEUE_BOARD_REFRESH_SECONDS must be a whole number of seconds from 0 to 3600, got '5'.",
            hint="Remove it for the default (5: the panel's lists refresh every 5 s), set e.g. 10, "
            "or 0 to turn the refresh off (docs/settings.md).",
            id="queues.E029",
        )
    ]


def test_the_function_filter_reads_no_data_longer_than_a_job_can_have(client, private_redis):
    """``?func=`` reads each listed job's ``data`` to find its function; a ``data`` planted far over the caps is not
    read (its length is), and its job matches no function."""
    adds = plant("failed", 4)
    connection = redis.Redis.from_url(private_redis.url)
    connection.hset(keys.job_key(adds[1]), "data", b"x" * (20 * 1024 * 1024))
    before = connection.info("stats")["total_net_output_bytes"]
    html = client.get(f"{PANEL}/{DEFAULT}/failed/?func=add").content.decode()
    assert connection.info("stats")["total_net_output_bytes"] - before < 1024 * 1024  # the planted data: 20 MB
    assert listed(html) == list(reversed([adds[0], *adds[2:]]))
