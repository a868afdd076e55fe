"""The panel's Batches pages (issue 34, section 4) with real batches in Redis and a burst worker in this
process: the list, a batch's page with its members by state, Cancel (audited), a job's batch and chain on its
page, permissions, 404s, the older-worker warning, and the index kept bounded."""

import time

import pytest
from django.test import Client
from django.urls import reverse
from django_rq.settings import get_queues_map

import queues
from queues.keyspace import keys
from queues.models import AuditEntry
from queues.workflows import index
from tests.support.panel import make_staff
from tests.support.worker import run_burst

pytestmark = pytest.mark.django_db(transaction=True)

MEMBER = "tests.jobs.batches.member"
CALLBACK = "tests.jobs.batches.callback"
FAIL = "tests.jobs.batches.fail_until"


@pytest.fixture
def record(tmp_path):
    return str(tmp_path / "runs.txt")


@pytest.fixture
def viewer(django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_queue_panel"))
    return client


@pytest.fixture
def actor(django_user_model):
    client = Client()
    client.force_login(make_staff(django_user_model, "actor", "queues.act_on_queue_panel"))
    return client


def job_url(job_id, queue="default"):
    return reverse("django_rq:job_detail", args=[get_queues_map()[queue], job_id])


def batch_url(batch_id):
    return reverse("django_rq:queues_batch", args=[batch_id])


def mixed_batch(queue_redis, record, tmp_path):
    """A batch with 2 finished members, 1 dead, 1 pending (scheduled an hour away): running, its sets kept."""
    with queues.batch(
        on_success=queues.call("default", CALLBACK, record, "success"),
        on_death=queues.call("default", CALLBACK, record, "death"),
        description="<b>sync</b> of seller 7",
    ) as b:
        done = [queues.enqueue("default", MEMBER, record, i) for i in range(2)]
        dead = queues.enqueue("default", FAIL, record, str(tmp_path / "never"))
        later = queues.enqueue("default", MEMBER, record, 9, delay=3600)
    run_burst(queue_redis)
    return b, done, dead, later


def test_the_list_shows_batches_newest_first_with_state_progress_and_escaped_description(
    viewer, queue_redis, record, tmp_path
):
    with queues.batch(description="first") as older:
        queues.enqueue("default", MEMBER, record, 0)
    b, *_ = mixed_batch(queue_redis, record, tmp_path)
    page = viewer.get(reverse("django_rq:queues_batches"))
    html = page.content.decode()
    assert page.status_code == 200
    assert html.index(f'data-batch="{b.id}"') < html.index(f'data-batch="{older.id}"')  # newest first
    assert "&lt;b&gt;sync&lt;/b&gt; of seller 7" in html and "<b>sync</b>" not in html
    row = html[html.index(f'data-batch="{b.id}"') :].split("</tr>")[0]
    assert f'href="{batch_url(b.id)}"' in row
    assert 'class="batch-state batch-state-running">running<' in row
    assert '<progress class="job-progress" value="3" max="4">' in row  # finished + dead of total
    assert '<td class="batch-finished">2</td>' in row and '<td class="batch-dead">1</td>' in row
    assert '<td class="batch-pending">1</td>' in row
    older_row = html[html.index(f'data-batch="{older.id}"') :].split("</tr>")[0]
    assert "batch-state-succeeded" in older_row and '<progress class="job-progress" value="1" max="1">' in older_row


def test_the_home_page_links_to_the_batches_page(viewer, queue_redis):
    html = viewer.get(reverse("django_rq:home")).content.decode()
    assert f'id="batches-link" href="{reverse("django_rq:queues_batches")}"' in html


def test_the_list_is_paged_and_an_expired_batch_leaves_the_index(viewer, queue_redis):
    ids = []
    for _ in range(27):
        with queues.batch() as b:
            pass
        ids.append(b.id)
    first = viewer.get(reverse("django_rq:queues_batches")).content.decode()
    assert first.count('class="batch-link"') == 25 and 'href="?start=25"' in first
    assert f'data-batch="{ids[0]}"' not in first and f'data-batch="{ids[-1]}"' in first
    queue_redis.delete(keys.batch_key(ids[0]))  # expired
    second = viewer.get(reverse("django_rq:queues_batches"), {"start": 25}).content.decode()
    assert second.count('class="batch-link"') == 1 and f'data-batch="{ids[1]}"' in second
    assert queue_redis.zscore(keys.batch_index_key(), ids[0]) is None  # dropped at the read
    bad = viewer.get(reverse("django_rq:queues_batches"), {"start": "-1"})
    assert bad.status_code == 400 and "start must be a whole number" in bad.content.decode()


def test_the_batch_page_lists_members_by_state_each_linking_to_its_job_page(viewer, queue_redis, record, tmp_path):
    b, done, dead, later = mixed_batch(queue_redis, record, tmp_path)
    url = batch_url(b.id)
    page = viewer.get(url)
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="batch-state" class="batch-state-running">running<' in html
    assert "&lt;b&gt;sync&lt;/b&gt;" in html and "<b>sync</b>" not in html
    assert "4 total: 2 finished, 1 dead, 1 pending; 0 canceled" in html
    # Callbacks: on_death fired (a member died), on_success waits; each links to its job's page.
    state = queues.batch_state(b.id)
    death = html[html.index('data-kind="on_death"') :].split("</tr>")[0]
    assert f'href="{job_url(state.callbacks["on_death"])}"' in death and "not yet" not in death
    success = html[html.index('data-kind="on_success"') :].split("</tr>")[0]
    assert f'href="{job_url(state.callbacks["on_success"])}"' in success and "not yet" in success
    assert "deferred" in success
    # Pending by default: the scheduled member only.
    assert html.count('class="member-link"') == 1 and f'href="{job_url(later.id)}"' in html
    finished = viewer.get(url, {"state": "finished"}).content.decode()
    assert finished.count('class="member-link"') == 2
    assert all(f'href="{job_url(j.id)}"' in finished for j in done)
    dead_page = viewer.get(url, {"state": "dead"}).content.decode()
    assert dead_page.count('class="member-link"') == 1 and f'href="{job_url(dead.id)}"' in dead_page
    assert viewer.get(url, {"state": "canceled"}).content.decode().count('class="member-link"') == 0
    for cursor in ("9" * 20, "-1", "x"):  # past SSCAN's 64 bits, or not a cursor: the first page again
        again = viewer.get(url, {"state": "finished", "cursor": cursor})
        assert again.status_code == 200 and again.content.decode().count('class="member-link"') == 2
    assert viewer.get(job_url(done[0].id)).status_code == 200  # a member's link opens its page


def test_a_member_list_is_paged_by_cursor(viewer, queue_redis, record):
    with queues.batch() as b:
        queues.enqueue_many("default", MEMBER, [(record, i) for i in range(300)])  # a hashtable set: SSCAN pages
    seen, url, pages = set(), batch_url(b.id), 0
    params = {"state": "pending"}
    while True:
        html = viewer.get(url, params).content.decode()
        pages += 1
        seen |= {part.split('"')[0] for part in html.split('class="member-link" href="')[1:]}
        if 'id="next-page"' not in html:
            break
        cursor = html.split('id="next-page" href="?state=pending&amp;cursor=')[1].split('"')[0]
        params = {"state": "pending", "cursor": cursor}
    assert len(seen) == 300 and pages > 1


def test_a_succeeded_batch_shows_its_counts_and_says_its_lists_were_dropped(viewer, queue_redis, record):
    with queues.batch() as b:
        queues.enqueue("default", MEMBER, record, 1)
    run_burst(queue_redis)
    html = viewer.get(batch_url(b.id)).content.decode()
    assert "1 total: 1 finished, 0 dead, 0 pending" in html and 'id="members-dropped"' in html
    assert 'id="cancel-batch"' not in html  # it ended: nothing to cancel


@pytest.mark.parametrize("batch_id", ["no-such-batch", "a.b", "x" * 201])
def test_an_unknown_or_malformed_batch_id_answers_404(viewer, actor, queue_redis, batch_id):
    assert viewer.get(batch_url(batch_id)).status_code == 404
    assert actor.get(reverse("django_rq:queues_batch_cancel", args=[batch_id])).status_code == 404
    assert actor.post(reverse("django_rq:queues_batch_cancel", args=[batch_id])).status_code == 404


def test_cancel_confirms_then_cancels_the_waiting_members_and_is_audited(actor, queue_redis, record, tmp_path):
    b, _done, _dead, later = mixed_batch(queue_redis, record, tmp_path)
    html = actor.get(batch_url(b.id)).content.decode()
    cancel_url = reverse("django_rq:queues_batch_cancel", args=[b.id])
    assert f'id="cancel-batch" class="deletelink" href="{cancel_url}"' in html
    confirm = actor.get(cancel_url).content.decode()
    assert "Are you sure" in confirm and 'id="confirm-form"' in confirm
    assert queues.batch_state(b.id).state == "running"  # the GET changed nothing
    response = actor.post(cancel_url, follow=True)
    assert response.redirect_chain[-1][0] == batch_url(b.id)
    assert "1 waiting member(s) canceled" in response.content.decode()
    state = queues.batch_state(b.id)
    assert (state.state, state.canceled) == ("canceled", 1)
    assert queues.fetch_job(later.id).get_status() == "canceled"
    entry = AuditEntry.objects.get(action="cancel_batch")
    assert entry.identity == "actor" and entry.job_ids == [b.id, later.id] and entry.outcome == "ok"
    again = actor.post(cancel_url, follow=True).content.decode()
    assert "not canceled: it has already canceled" in again
    assert AuditEntry.objects.count() == 1  # the second POST changed nothing and says so


def test_reading_needs_view_and_cancel_needs_act(prod, viewer, actor, django_user_model, queue_redis, record):
    with queues.batch() as b:
        queues.enqueue("default", MEMBER, record, 1)
    cancel_url = reverse("django_rq:queues_batch_cancel", args=[b.id])
    for url in (reverse("django_rq:queues_batches"), batch_url(b.id)):
        anonymous = Client().get(url)
        assert anonymous.status_code == 302 and reverse("admin:login") in anonymous["Location"]
        nobody = Client()
        nobody.force_login(make_staff(django_user_model, f"nobody-{len(url)}"))
        assert nobody.get(url).status_code == 403
        assert viewer.get(url).status_code == 200
    assert 'id="cancel-batch"' not in viewer.get(batch_url(b.id)).content.decode()  # view only: no button
    assert viewer.get(cancel_url).status_code == 403
    assert viewer.post(cancel_url).status_code == 403
    assert queues.batch_state(b.id).state == "running" and not AuditEntry.objects.exists()
    assert actor.post(cancel_url).status_code == 302 and queues.batch_state(b.id).state == "canceled"


def test_a_job_page_shows_its_batch(viewer, queue_redis, record, tmp_path):
    b, done, _dead, _later = mixed_batch(queue_redis, record, tmp_path)
    html = viewer.get(job_url(done[0].id)).content.decode()
    assert f'id="job-batch-link" href="{batch_url(b.id)}"' in html
    assert '<span id="job-batch-state">running</span>' in html and "&lt;b&gt;sync&lt;/b&gt;" in html
    outside = queues.enqueue("default", MEMBER, record, 5)
    assert 'id="job-batch"' not in viewer.get(job_url(outside.id)).content.decode()


def test_a_job_page_shows_its_chain_with_the_steps_waiting_on_a_dead_one(viewer, queue_redis, tmp_path):
    record = str(tmp_path / "runs.txt")
    chain = queues.chain(
        queues.call("default", "tests.jobs.batches.add", record, 1),
        queues.call("default", FAIL, record, str(tmp_path / "never")),
        queues.call("default", "tests.jobs.batches.add", record, 2),
    )
    for _ in range(3):
        run_burst(queue_redis)
    state = queues.chain_state(chain.id)
    dead_id = state.steps[1].job_ids[0]
    html = viewer.get(job_url(dead_id)).content.decode()
    assert f'<code id="job-chain-id">{chain.id}</code>: <span id="job-chain-state">stopped</span>' in html
    assert f'id="job-batch-link" href="{batch_url(state.steps[1].batch_id)}"' in html
    last = html[html.index('data-step="3"') :].split("</tr>")[0]
    assert '<td class="chain-step-state">waiting</td>' in last and f'href="{job_url(dead_id)}"' in last
    first = html[html.index('data-step="1"') :].split("</tr>")[0]
    assert "succeeded" in first and f'href="{batch_url(state.steps[0].batch_id)}"' in first


def test_the_list_warns_of_a_registered_worker_that_does_not_count_members(viewer, queue_redis):
    older, current = keys.worker_key("older-release-worker"), keys.worker_key("this-release-worker")
    queue_redis.sadd(keys.workers_key(), older, current)
    queue_redis.hset(keys.batch_workers_key(), current, 1)
    try:
        html = viewer.get(reverse("django_rq:queues_batches")).content.decode()
        assert 'id="older-workers"' in html and "<code>older-release-worker</code>" in html
        assert "this-release-worker" not in html
        queue_redis.hset(keys.batch_workers_key(), older, 1)  # upgraded
        assert 'id="older-workers"' not in viewer.get(reverse("django_rq:queues_batches")).content.decode()
    finally:
        queue_redis.srem(keys.workers_key(), older, current)
        queue_redis.hdel(keys.batch_workers_key(), older, current)


def test_the_index_is_trimmed_by_age_and_length_at_each_open(queue_redis, monkeypatch):
    key = keys.batch_index_key()
    now = time.time()
    queue_redis.zadd(key, {"ancient": now - index.keep_seconds() - 10, "recent": now - 60})
    with queues.batch() as b:
        pass
    assert queue_redis.zscore(key, "ancient") is None  # older than the retention
    assert queue_redis.zscore(key, "recent") is not None and queue_redis.zscore(key, b.id) is not None
    monkeypatch.setattr(index, "MAX_ENTRIES", 2)
    with queues.batch() as newest:
        pass
    assert [m.decode() for m in queue_redis.zrange(key, 0, -1)] == [b.id, newest.id]


def test_an_index_of_another_type_still_shows_the_page(viewer, admin_redis, queue_redis):
    admin_redis.set(keys.batch_index_key(), "planted: a string")
    page = viewer.get(reverse("django_rq:queues_batches"))
    assert page.status_code == 200 and 'id="no-batches"' in page.content.decode()
