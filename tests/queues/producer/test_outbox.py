"""The transactional outbox (queues/producer/outbox.py), in this process: a real Redis, a real database.

"Redis down" is a URL nothing listens on (connections are refused at once); the process-level
tests (SIGKILL after the commit, a Redis stopped for 30 s) are in test_outbox_processes.py.
"""

import io
import logging

import pytest
from django.db import transaction
from django.utils import timezone
from rq.registry import ScheduledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob, get_queue
from queues.models import OutboxEntry
from queues.producer import outbox
from queues.producer.write import write_job
from queues.worker.adapter import OptimaWorker
from tests.jobs import sample

pytestmark = pytest.mark.django_db(transaction=True)

DOWN = "redis://127.0.0.1:1/0"  # port 1: connection refused at once


@pytest.fixture
def redis_down(settings):
    """Make the queues' Redis unreachable; returns a function that brings it back."""
    up = settings.QUEUES_REDIS_URL
    settings.QUEUES_REDIS_URL = DOWN

    def back():
        settings.QUEUES_REDIS_URL = up

    return back


def test_inside_a_transaction_the_job_is_a_row_until_the_commit_then_in_redis_and_the_row_gone():
    queue = get_queue("default")
    with transaction.atomic():
        job = queues.enqueue("default", sample.add, 1, 2)
        assert list(OutboxEntry.objects.values_list("job_id", "queue")) == [(job.id, "default")]
        assert queue.job_ids == []
    assert queue.job_ids == [job.id]
    assert OutboxEntry.objects.count() == 0


def test_a_rollback_leaves_neither_a_row_nor_a_job():
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with transaction.atomic():
            queues.enqueue("default", sample.add, 1, 2)
            raise Boom
    assert OutboxEntry.objects.count() == 0
    assert get_queue("default").job_ids == []


def test_redis_down_at_the_commit_the_commit_stands_and_the_relay_pushes_the_job_once_redis_is_back(redis_down, caplog):
    with caplog.at_level(logging.WARNING, logger="queues.outbox"):
        with transaction.atomic():
            job = queues.enqueue("default", sample.add, 1, 2)
            delayed = queues.enqueue("default", sample.add, 3, 4, delay=60)
    rows = {r.job_id: r for r in OutboxEntry.objects.all()}
    assert set(rows) == {job.id, delayed.id}
    assert all(
        r.claimed_until is None and r.push_attempts == 1 and "unavailable" in r.last_error for r in rows.values()
    )
    assert f"job {job.id} stays in the outbox" in caplog.text

    assert outbox.relay() == (0, 2)  # still down: nothing pushed, both left, claims released
    assert OutboxEntry.objects.filter(claimed_until__isnull=True).count() == 2

    redis_down()  # back
    assert outbox.relay() == (2, 0)
    queue = get_queue("default")
    assert queue.job_ids == [job.id]
    assert ScheduledJobRegistry(queue=queue).get_job_ids() == [delayed.id]
    assert OutboxEntry.objects.count() == 0
    pushed = queues.fetch_job(job.id)
    assert (pushed.args, pushed.meta["queue"], pushed.meta["attempts_allowed"]) == ([1, 2], "default", 5)


def test_the_relayed_job_is_the_one_the_caller_was_given_signed_and_runnable(redis_down, monkeypatch):
    from queues.connection.clients import get_connection

    # The relay runs at most every OUTBOX_RELAY_SECONDS per process: a worker of an earlier test in this process
    # may have relayed less than that ago, and this worker's tick would then skip it. A fresh schedule: due now.
    monkeypatch.setattr(outbox, "_schedule", outbox._Schedule())
    with transaction.atomic():
        job = queues.enqueue_call("default", sample.add, [20, 22], meta={"owner": "user:7"})
    redis_down()
    queue_redis = get_connection()
    OptimaWorker([get_queue("default", connection=queue_redis)], connection=queue_redis).work(
        burst=True, with_scheduler=False
    )  # its tick relays the row, then it runs the job
    ran = queues.fetch_job(job.id)
    assert ran.get_status() == "finished"
    assert ran.return_value() == 42
    assert ran.meta["owner"] == "user:7"
    assert OutboxEntry.objects.count() == 0


def test_durable_outside_a_transaction_is_accepted_while_redis_is_down(redis_down):
    job = queues.enqueue("default", sample.add, 1, 2, durable=True)
    assert OutboxEntry.objects.get().job_id == job.id
    redis_down()
    assert outbox.relay() == (1, 0)
    assert get_queue("default").job_ids == [job.id]


def test_without_durable_outside_a_transaction_redis_down_still_fails_fast(redis_down):
    with pytest.raises(queues.QueueUnavailable):
        queues.enqueue("default", sample.add, 1, 2)
    assert OutboxEntry.objects.count() == 0


def test_a_unique_enqueue_still_needs_redis_to_answer(redis_down):
    with pytest.raises(queues.QueueUnavailable):
        with transaction.atomic():
            queues.enqueue("default", sample.add, 1, 2, unique="cabinet-1")
    assert OutboxEntry.objects.count() == 0


def test_a_unique_enqueue_through_the_outbox_still_keeps_one_waiting_job():
    with transaction.atomic():
        first = queues.enqueue("default", sample.add, 1, 2, unique="cabinet-1")
        second = queues.enqueue("default", sample.add, 1, 2, unique="cabinet-1")
    assert get_queue("default").job_ids == [first.id]
    assert second.id != first.id and OutboxEntry.objects.count() == 0


def test_a_job_already_pushed_by_a_pusher_that_died_before_deleting_its_row_is_not_written_twice(redis_down):
    with transaction.atomic():
        job = queues.enqueue("default", sample.add, 1, 2)
    redis_down()
    row = OutboxEntry.objects.get()
    queue = get_queue("default")
    # The earlier pusher: wrote the job, then died (the row stays, claimed, until its claim runs out).
    write_job(queue, _restored(row, queue), None, explicit_id=True)
    OutboxEntry.objects.update(claimed_until=timezone.now() - timezone.timedelta(seconds=1), claimed_by="dead")

    assert outbox.relay() == (1, 0)
    assert queue.job_ids == [job.id]
    assert OutboxEntry.objects.count() == 0


def test_a_claimed_row_is_left_alone_until_its_claim_runs_out(redis_down):
    with transaction.atomic():
        queues.enqueue("default", sample.add, 1, 2)
    redis_down()
    OutboxEntry.objects.update(
        claimed_until=timezone.now() + timezone.timedelta(seconds=60), claimed_by="another-relay"
    )
    assert outbox.relay() == (0, 0)
    assert get_queue("default").job_ids == []
    OutboxEntry.objects.update(claimed_until=timezone.now() - timezone.timedelta(seconds=1))
    assert outbox.relay() == (1, 0)


def test_the_committing_process_holds_its_row_from_the_insert_and_a_relay_takes_it_after_the_grace():
    """A process killed between its commit and its push: its row is claimed by it for PUSH_GRACE
    seconds from the insert, then any relay pushes it."""
    started = timezone.now()
    with transaction.atomic():
        queues.enqueue("default", sample.add, 1, 2)
        row = OutboxEntry.objects.get()
        assert row.claimed_by and row.claimed_until >= started + timezone.timedelta(seconds=outbox.PUSH_GRACE)
        transaction.get_connection().run_on_commit.clear()  # as if killed right after the commit
    assert outbox.relay() == (0, 0)  # still its own
    OutboxEntry.objects.update(claimed_until=timezone.now() - timezone.timedelta(seconds=1))  # the grace is over
    assert outbox.relay() == (1, 0)
    assert get_queue("default").job_ids == [row.job_id]


def test_after_a_long_transaction_the_push_renews_its_claim_unless_a_relay_took_the_row(monkeypatch):
    monkeypatch.setattr(outbox, "PUSH_GRACE", 0.0)  # every transaction counts as long
    with transaction.atomic():
        kept = queues.enqueue("default", sample.add, 1, 2)
    assert get_queue("default").job_ids == [kept.id] and not OutboxEntry.objects.exists()

    with transaction.atomic():
        taken = queues.enqueue("default", sample.add, 3, 4)
        OutboxEntry.objects.update(claimed_by="a-relay")  # a relay took it meanwhile
    assert get_queue("default").job_ids == [kept.id]  # not pushed by the committing process
    assert OutboxEntry.objects.get().job_id == taken.id


def test_two_relays_never_claim_the_same_row(redis_down):
    with transaction.atomic():
        for i in range(5):
            queues.enqueue("default", sample.add, i, i)
    first = outbox._claim(OutboxEntry, "default", "relay-a", 3)
    second = outbox._claim(OutboxEntry, "default", "relay-b", 100)
    assert len(first) == 3 and len(second) == 2
    assert not set(first) & set(second)
    assert outbox._claim(OutboxEntry, "default", "relay-c", 100) == []


def test_an_explicit_job_id_taken_in_redis_by_another_job_drops_the_row_with_an_error(redis_down, caplog):
    with transaction.atomic():
        queues.enqueue("default", sample.add, 1, 2, job_id="sync-42")
    redis_down()
    queues.enqueue("default", sample.add, 5, 5, job_id="sync-42")  # another job took the id meanwhile
    with caplog.at_level(logging.ERROR, logger="queues.outbox"):
        assert outbox.relay() == (1, 0)
    assert "job sync-42 (queue default) dropped: A job with id 'sync-42' already exists" in caplog.text
    assert queues.fetch_job("sync-42").args == [5, 5]
    assert OutboxEntry.objects.count() == 0


def test_rows_of_another_environment_prefix_are_not_relayed(redis_down, settings):
    with transaction.atomic():
        queues.enqueue("default", sample.add, 1, 2)
    redis_down()
    settings.QUEUE_PREFIX = "another-env"
    assert outbox.relay() == (0, 0)
    assert outbox.stats() == {}


def test_stats_counts_rows_and_the_oldest_per_queue(redis_down):
    with transaction.atomic():
        queues.enqueue("default", sample.add, 1, 2)
        queues.enqueue("default", sample.add, 1, 2)
        queues.enqueue("content", sample.add, 1, 2)
    stats = outbox.stats()
    assert {q: n for q, (n, _) in stats.items()} == {"default": 2, "content": 1}
    assert stats["default"][1] <= timezone.now()


def test_the_stored_hash_round_trips_bytes_and_text():
    stored = outbox.encode({"data": b"\x00\xffzip", "origin": "default", "retries_left": 3})
    assert stored["data"] == {"b64": "AP96aXA="}
    assert outbox.decode(stored) == {"data": b"\x00\xffzip", "origin": b"default", "retries_left": b"3"}


def _restored(row, queue):
    job = OptimaJob(row.job_id, connection=queue.connection, serializer=queue.serializer)
    job.restore(outbox.decode(row.job))
    return job


def test_manage_py_queues_relay_pushes_what_is_left_and_fails_while_redis_is_down(redis_down):
    from django.core.management import CommandError, call_command

    with transaction.atomic():
        job = queues.enqueue("default", sample.add, 1, 2)
    with pytest.raises(CommandError, match="1 jobs stay in the outbox: Redis did not take them"):
        call_command("queues_relay")
    redis_down()
    out = io.StringIO()
    call_command("queues_relay", stdout=out)
    assert out.getvalue() == "Outbox: 1 pushed, none left\n"
    assert get_queue("default").job_ids == [job.id]
    with pytest.raises(CommandError, match="--interval is 0.0; give a number of seconds > 0"):
        call_command("queues_relay", "--loop", "--interval", "0")


def test_metrics_count_the_outbox_rows_and_the_oldest_age_per_queue(redis_down):

    from queues.metrics import collector

    with transaction.atomic():
        queues.enqueue("default", sample.add, 1, 2)
        queues.enqueue("default", sample.add, 1, 2)
    OutboxEntry.objects.update(created_at=timezone.now() - timezone.timedelta(seconds=90))
    redis_down()
    snapshot = collector.read_snapshot(["default", "content"])
    families = {f.name: f for f in collector.families(snapshot, "optima")}
    rows = {s.labels["queue"]: s.value for s in families["optima_queue_outbox"].samples}
    ages = {s.labels["queue"]: s.value for s in families["optima_queue_outbox_oldest_age_seconds"].samples}
    assert rows == {"default": 2, "content": 0}
    assert 90 <= ages["default"] < 150 and ages["content"] == 0


def test_the_admin_lists_this_environments_outbox_rows_read_only(redis_down, admin_client, settings):
    with transaction.atomic():
        job = queues.enqueue("default", sample.add, 1, 2)
    page = admin_client.get("/admin/queues/outboxentry/")
    assert page.status_code == 200
    assert job.id in page.content.decode() and "unavailable" in page.content.decode()
    row = OutboxEntry.objects.get()
    detail = admin_client.get(f"/admin/queues/outboxentry/{row.pk}/change/")
    assert detail.status_code == 200 and "Save" not in detail.content.decode()
    settings.QUEUE_PREFIX = "another-env"
    assert job.id not in admin_client.get("/admin/queues/outboxentry/").content.decode()


def test_a_relay_skips_a_server_that_is_down_and_pushes_the_other_servers_rows(redis_down, second_redis):
    """Issue 36: a server down stops only its own queues. Server b's rows wait (tried once per relay), the
    default server's are pushed behind them."""
    second_redis.stop()
    with transaction.atomic():
        b1 = queues.enqueue("on-b", sample.add, 1, 2)
        b2 = queues.enqueue("on-b", sample.add, 3, 4)
        d1 = queues.enqueue("default", sample.add, 5, 6)
    assert OutboxEntry.objects.count() == 3  # both servers refused at the commit
    redis_down()  # the default server is back; b is still down
    assert outbox.relay() == (1, 2)
    assert get_queue("default").job_ids == [d1.id]
    attempts = dict(OutboxEntry.objects.values_list("job_id", "push_attempts"))
    assert attempts == {b1.id: 2, b2.id: 1}  # b2 not tried once b1 failed: b was known down
    assert OutboxEntry.objects.filter(claimed_until__isnull=True).count() == 2
    second_redis.start()
    assert outbox.relay() == (2, 0)
    assert get_queue("on-b").job_ids == [b1.id, b2.id]
    assert get_queue("default").job_ids == [d1.id]
