"""Nothing unverified gets a signature behind an operator's back, and the states shown are true
(issue 19: finding 2 with "What to build" item 3; the first half of finding 8).

- Reconcile verifies a failed-registry job's signature as the worker's gate does (the current key and
  ``QUEUE_SIGNING_OLD_KEYS``): one that does not verify becomes a dead letter of its own reason,
  ``unverified``, never the ``exhausted`` its planted meta claims.
- Rows whose data was never verified (``unverified``, the worker's ``unsigned``) are never retried by a
  bulk action or a failure group's action; only by a one-row retry whose confirmation page shows the
  function and the arguments and says they were not verified, audited as such.
- A job stopped from the panel and enqueued again from its page leaves the failed list; its dead
  letter and the gauge follow (a real worker process).

Real Redis; what an attacker writes is planted with Redis commands only.
"""

import uuid

import pytest
from django.core.management import call_command
from django.utils import timezone
from rq.job import JobStatus
from rq.registry import FailedJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.failures import deadletter
from queues.failures.operations import retry_dead_letter
from queues.jobs import signing
from queues.keyspace import keys
from queues.metrics import collector
from queues.models import AuditEntry, DeadLetter, FailureGroup, OutboxEntry
from tests.support import wait_for
from tests.support.panel import basic_header
from tests.support.worker import plant, run_burst

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/queues/deadletter/"
GROUPS = "/admin/queues/failuregroup/"
APPLY_PRICE = "features.repricer.jobs.apply_price"
UNAVAILABLE = "features.marketplace.client.MarketplaceUnavailable"


def messages_of(response):
    return [str(m) for m in response.context["messages"]]


def queued_jobs(connection, name):
    return [OptimaJob.fetch(job_id, connection=connection) for job_id in get_queue(name).get_job_ids()]


def plant_failed(connection, func, args, kwargs=None, *, queue="repricer", meta=None, signed=False):
    """A job hash as a dead one looks, written with Redis commands only, ZADDed to the failed registry."""
    job = OptimaJob.create(
        func,
        args=list(args),
        kwargs=kwargs or {},
        connection=connection,
        id=f"forged-{uuid.uuid4().hex[:8]}",
        origin=queue,
        meta={"queue": queue, "attempt": 1, "attempts_allowed": 1, **(meta or {})},
    )
    job._status = JobStatus.FAILED
    job.ended_at = timezone.now()
    if signed:
        job.signature = signing.sign(job)
    job.save()
    connection.zadd(keys.failed_key(queue), {job.id: "+inf"})
    return job.id


def forged_price_change(connection, product_id=111):
    """The issue's attack: an unsigned ``apply_price(111, "0.01", ...)`` planted as an exhausted dead job."""
    return plant_failed(
        connection,
        APPLY_PRICE,
        [product_id, "0.01", "forged-key"],
        meta={
            "dead": "exhausted",
            "deaths": 1,
            "attempts_made": 1,
            "dead_at": timezone.now().isoformat(),
            "exc_type": UNAVAILABLE,
            "exc_message": f"marketplace answered 503 for product {product_id}",
            "dead_worker": "repricer-worker-1",
        },
    )


def real_price_death(connection, product_id=112):
    """A real, signed repricer job that died of the marketplace: its dead letter and failure group."""
    job = queues.enqueue("repricer", APPLY_PRICE, product_id, "19.90", f"k-{product_id}")
    connection.lrem(keys.queue_key("repricer"), 0, job.id)
    job = OptimaJob.fetch(job.id, connection=connection)
    return job, deadletter.bury(
        job,
        reason="exhausted",
        exc_string=(
            'Traceback (most recent call last):\n  File "jobs.py", line 50\n'
            f"{UNAVAILABLE}: marketplace answered 503 for product {product_id}\n"
        ),
    )


# --- reconcile verifies what it copies --------------------------------------------------------------


def test_a_forged_dead_price_change_is_an_unverified_dead_letter_that_no_bulk_path_signs(actor, queue_redis):
    from features.repricer.models import PriceChange, Product

    Product.objects.create(product_id=111, price="20.00", price_updated_at=timezone.now())
    real, real_row = real_price_death(queue_redis)
    forged = forged_price_change(queue_redis)

    summary = deadletter.reconcile()

    assert (summary.mirrored, summary.errors) == (1, 0)
    row = DeadLetter.objects.get(job_id=forged)
    assert (row.reason, row.status, row.func_path, row.args) == (
        "unverified",
        "open",
        APPLY_PRICE,
        [111, "0.01", "forged-key"],
    )
    assert row.exc_type == "UnverifiedJob" and row.exc_message.startswith("Unverified: ")
    for claimed in ("MarketplaceUnavailable", "503", "exhausted", "repricer-worker-1"):
        assert claimed not in f"{row.exc_type} {row.exc_message} {row.traceback} {row.worker}", claimed
    assert (row.attempts_made, row.attempts_allowed) == (0, 0)
    assert row.fingerprint != real_row.fingerprint  # it joins no real failure group
    page = actor.get(f"{LIST}{row.pk}/change/").content.decode()
    assert "unverified" in page and "were not verified" in page

    # The writer takes the entry out of the failed registry (or its failure_ttl passes).
    queue_redis.zrem(keys.failed_key("repricer"), forged)

    bulk = actor.post(LIST, {"action": "retry_selected", "_selected_action": [row.pk], "post": "yes"}, follow=True)
    assert messages_of(bulk) == [
        "1 dead letter not retried: its function and arguments were never verified (unverified or unsigned). "
        "Retry it on its own from its page, which shows them."
    ]
    groups = list(FailureGroup.objects.values_list("pk", flat=True))
    assert len(groups) == 2
    grouped = actor.post(GROUPS, {"action": "retry_groups", "_selected_action": groups, "post": "yes"}, follow=True)
    assert messages_of(grouped) == [
        "1 dead letters retried in 2 failure groups (1 skipped, 0 failed).",
        "1 dead letter skipped: never verified (unverified or unsigned); retry it on its own from its page.",
    ]
    call_command("queues_reconcile")  # the row's job left the failed registry: not retried; only an operator discards
    assert DeadLetter.objects.get(pk=row.pk).status == "open"
    actor.post(LIST, {"action": "retry_selected", "_selected_action": [row.pk], "post": "yes"})

    assert [job.id for job in queued_jobs(queue_redis, "repricer")] == [real.id]  # only the real one, in place
    assert OutboxEntry.objects.count() == 0
    assert DeadLetter.objects.get(pk=row.pk).retried_as == ""
    assert str(Product.objects.get(product_id=111).price) == "20.00"
    assert not PriceChange.objects.filter(product_id=111).exists()
    details = [e.detail for e in AuditEntry.objects.filter(action="retry").order_by("id")]
    assert len(details) == 2 and all("never verified" in d for d in details)
    group_detail = AuditEntry.objects.get(action="retry_group", job_ids=[forged]).detail
    assert "1 skipped" in group_detail and "1 never verified" in group_detail


def test_reconcile_verifies_with_the_current_key_and_the_old_keys(queue_redis, settings):
    first, second = "a" * 40, "b" * 40
    settings.QUEUE_SIGNING_KEY = first
    signed_with_first = plant_failed(
        queue_redis,
        "tests.jobs.sample.add",
        [1, 2],
        queue="default",
        signed=True,
        meta={"dead": "exhausted", "deaths": 1},
    )
    settings.QUEUE_SIGNING_KEY, settings.QUEUE_SIGNING_OLD_KEYS = second, [first]
    signed_with_second = plant_failed(
        queue_redis,
        "tests.jobs.sample.add",
        [3, 4],
        queue="default",
        signed=True,
        meta={"dead": "exhausted", "deaths": 1},
    )
    deadletter.reconcile(["default"])
    assert dict(DeadLetter.objects.values_list("job_id", "reason")) == {
        signed_with_first: "exhausted",
        signed_with_second: "exhausted",
    }

    settings.QUEUE_SIGNING_OLD_KEYS = []  # the first key retired: what it signed no longer verifies
    DeadLetter.objects.all().delete()
    deadletter.reconcile(["default"])
    assert dict(DeadLetter.objects.values_list("job_id", "reason")) == {
        signed_with_first: "unverified",
        signed_with_second: "exhausted",
    }


def test_a_signature_that_is_not_hex_ascii_is_unverified_and_reconcile_goes_on(queue_redis):
    planted = plant_failed(
        queue_redis, "tests.jobs.sample.add", [1, 2], queue="default", meta={"dead": "exhausted", "deaths": 1}
    )
    queue_redis.hset(keys.job_key(planted), "signature", "é" * 32)
    summary = deadletter.reconcile(["default"])
    assert summary.errors == 0
    assert DeadLetter.objects.get(job_id=planted).reason == "unverified"


def test_an_unverified_entry_does_not_reopen_or_rewrite_a_row_an_operator_dealt_with(queue_redis):
    forged = plant_failed(
        queue_redis, "tests.jobs.sample.add", [1, 2], queue="default", meta={"dead": "exhausted", "deaths": 1}
    )
    deadletter.reconcile(["default"])
    DeadLetter.objects.filter(job_id=forged).update(status="retried", retried_as="other-job")
    job = OptimaJob.fetch(forged, connection=queue_redis)
    job.meta.update({"deaths": 99})
    job.save_meta()
    assert deadletter.reconcile(["default"]).mirrored == 0
    assert DeadLetter.objects.get(job_id=forged).status == "retried"


# --- never verified: one row at a time, confirmed on a page that shows it ----------------------------


def test_only_a_one_row_retry_confirmed_on_a_page_showing_the_unverified_call_retries_it(actor, queue_redis, tmp_path):
    marker = str(tmp_path / "ran")
    forged = plant_failed(
        queue_redis,
        "tests.jobs.sample.touch",
        [marker],
        {"content": "forged"},
        queue="default",
        meta={"dead": "exhausted", "deaths": 1},
    )
    deadletter.reconcile(["default"])
    row = DeadLetter.objects.get(job_id=forged)

    page = actor.get(f"{LIST}{row.pk}/retry/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="unverified-call"' in html and "tests.jobs.sample.touch" in html
    assert f"&quot;{marker}&quot;" in html and "&quot;content&quot;: &quot;forged&quot;" in html
    assert "were not verified" in html
    assert f'<input type="hidden" name="accept_unverified" value="{row.pk}">' in html

    # A POST without the confirmation page's consent (or with another row's) retries nothing.
    actor.post(f"{LIST}{row.pk}/retry/", {"accept_unverified": str(row.pk + 1)})
    assert get_queue("default").count == 0 and DeadLetter.objects.get(pk=row.pk).status == "open"
    assert retry_dead_letter(row.pk).outcome == "skipped"  # the operation itself refuses, whoever calls it

    actor.post(f"{LIST}{row.pk}/retry/", {"accept_unverified": str(row.pk)})
    row.refresh_from_db()
    assert row.status == "retried" and row.retried_as not in ("", forged)
    new = OptimaJob.fetch(row.retried_as, connection=queue_redis)
    assert signing.verify(new) and new.args == [marker] and new.meta["retry_of"] == forged
    entry = AuditEntry.objects.filter(action="retry").order_by("-id").first()
    assert (entry.job_ids, entry.outcome) == ([forged, new.id], "ok")
    assert "unverified" in entry.detail and "not verified" in entry.detail
    run_burst(queue_redis)
    assert (tmp_path / "ran").read_text().split() == ["forged"]


def test_the_workers_unsigned_rows_are_skipped_by_bulk_and_group_retries_which_say_how_many(
    actor, queue_redis, tmp_path
):
    planted = [plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / f"ran-{i}")]) for i in range(2)]
    run_burst(queue_redis)
    rows = list(DeadLetter.objects.filter(job_id__in=planted))
    assert sorted(r.reason for r in rows) == ["unsigned", "unsigned"]
    queue_redis.delete(keys.failed_key("default"))  # a retry now would have to build a new job

    confirm = actor.post(LIST, {"action": "retry_selected", "_selected_action": [r.pk for r in rows]})
    assert "2 of them were never verified" in confirm.content.decode()
    bulk = actor.post(
        LIST, {"action": "retry_selected", "_selected_action": [r.pk for r in rows], "post": "yes"}, follow=True
    )
    assert messages_of(bulk) == [
        "2 dead letters not retried: their function and arguments were never verified (unverified or unsigned). "
        "Retry each on its own from its page, which shows them."
    ]
    group = FailureGroup.objects.get()
    confirm = actor.get(f"{GROUPS}{group.pk}/retry/").content.decode()
    assert "2 of them were never verified" in confirm
    actor.post(f"{GROUPS}{group.pk}/retry/")
    assert get_queue("default").count == 0
    assert set(DeadLetter.objects.values_list("status", flat=True)) == {"open"}
    entry = AuditEntry.objects.get(action="retry_group")
    assert entry.outcome == "partial"
    assert "2 open dead letters, 0 retried, 2 skipped, 0 failed (2 never verified" in entry.detail


# --- stop, then enqueue again from the job's page ---------------------------------------------------


@pytest.fixture
def board(settings):
    from django.test import Client

    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = "ops"
    settings.QUEUE_BOARD_PASSWORD = "s3cret-board-pass"
    return Client(**basic_header())


def dead_letter_counts(name="default"):
    sample = collector.read_snapshot([name]).queues[name]
    return sample.jobs["failed"], sample.dead_letters


@pytest.mark.slow
def test_a_job_stopped_then_enqueued_again_from_its_page_leaves_the_failed_list_and_its_dead_letter(
    board, queue_redis, start_worker, tmp_path
):
    release = tmp_path / "release"
    job = queues.enqueue("default", "tests.jobs.waiting.wait_for_file", str(release), attempts=3)
    worker = start_worker("default")
    status = lambda: OptimaJob.fetch(job.id, connection=queue_redis).get_status(refresh=True)  # noqa: E731
    wait_for(lambda: status() == JobStatus.STARTED, timeout=60, message="the job to start")
    board.post(f"/admin/queues/queues/1/{job.id}/stop/")
    wait_for(
        lambda: DeadLetter.objects.filter(job_id=job.id, reason="stopped", status="stopped").exists(),
        timeout=60,
        message="the stopped job's dead letter",
    )
    assert dead_letter_counts() == (1, 0)  # issue 32: "stopped by an operator", waiting for nobody: not open

    release.touch()
    page = board.get(f"/admin/queues/queues/1/{job.id}/")
    assert f"/admin/queues/queues/1/{job.id}/enqueue/" in page.content.decode()  # the page's Enqueue button
    response = board.post(f"/admin/queues/queues/1/{job.id}/enqueue/", follow=True)
    assert messages_of(response) == [f"You have successfully enqueued {job.id}"]
    wait_for(lambda: status() == JobStatus.FINISHED, timeout=60, message="the job enqueued again to finish")

    def truthful():
        assert job.id not in FailedJobRegistry("default", connection=queue_redis)
        row = DeadLetter.objects.get(job_id=job.id)
        assert (row.status, row.retried_as) == ("retried", job.id)
        assert dead_letter_counts() == (0, 0)

    truthful()
    deadletter.reconcile()  # the dead letters' part of maintenance
    call_command("queues_reconcile")
    truthful()
    assert worker.stop() == 0
    entry = AuditEntry.objects.filter(action="enqueue").get()
    assert (entry.job_ids, entry.outcome) == ([job.id], "ok")
    assert OptimaJob.fetch(job.id, connection=queue_redis).return_value() == "released"
