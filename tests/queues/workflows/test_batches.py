"""Batches (issue 34, section 1) with a real Redis and a burst worker in this process: membership, counts,
the callbacks fired once, cancel, the dead member retried or discarded, bad input."""

import pytest
from django.db import transaction

import queues
from queues.catalog.lookup import fetch_job, get_queue
from queues.failures.operations import discard_dead_letter, retry_dead_letter
from queues.jobs import meta as jobmeta
from queues.models import AuditEntry, DeadLetter
from queues.workflows import scripts
from queues.workflows.batches import set_keys
from tests.jobs.batches import lines
from tests.support.worker import run_burst

MEMBER = "tests.jobs.batches.member"
CALLBACK = "tests.jobs.batches.callback"


def callbacks(path):
    """The callback lines of ``path``: [(kind, batch id, finished, dead)]."""
    return [tuple(line.split()[:4]) for line in lines(path) if not line.startswith(("member", "parent", "recovered"))]


@pytest.fixture
def record(tmp_path):
    return str(tmp_path / "runs.txt")


def on(kind, record):
    return queues.call("default", CALLBACK, record, kind)


def test_a_batch_fires_on_success_and_on_complete_once_when_every_member_finished(queue_redis, record):
    with queues.batch(on_success=on("success", record), on_complete=on("complete", record), description="d") as b:
        for i in range(3):
            queues.enqueue("default", MEMBER, record, i)
        queues.enqueue_many("default", MEMBER, [(record, 10), (record, 11)])
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.pending, state.finished, state.description) == ("running", 5, 5, 0, "d")
    assert set(state.callbacks) == {"on_success", "on_complete"}
    assert fetch_job(state.callbacks["on_success"]).get_status() == "deferred"  # made at the open, waiting

    run_burst(queue_redis)

    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.pending, state.finished, state.dead) == ("succeeded", 5, 0, 5, 0)
    assert state.finished_at is not None and state.finished_at >= state.created_at
    assert sorted(callbacks(record)) == [("complete", b.id, "5", "0"), ("success", b.id, "5", "0")]
    assert fetch_job(state.callbacks["on_success"]).get_status() == "finished"


def test_an_empty_batch_completes_when_its_block_closes(queue_redis, record):
    with queues.batch(on_success=on("success", record), on_death=on("death", record)) as b:
        pass
    state = queues.batch_state(b.id)
    assert (state.state, state.total, set(state.fired)) == ("succeeded", 0, {"on_success", "on_death"})
    assert state.fired["on_death"] == "never"
    run_burst(queue_redis)
    assert callbacks(record) == [("success", b.id, "0", "0")]


def test_a_member_counted_twice_counts_once_and_fires_once(queue_redis, record):
    with queues.batch(on_success=on("success", record)) as b:
        job = queues.enqueue("default", MEMBER, record, 1)
    batch_keys = set_keys(b.id)
    for _ in range(2):  # the same success written twice (a member that ran again)
        queue_redis.eval(scripts.SUCCESS, len(batch_keys), *batch_keys, job.id, "2026-01-01T00:00:00.000000Z", "1")
    state = queues.batch_state(b.id)
    assert (state.state, state.finished) == ("succeeded", 1)
    queue = get_queue("default")
    assert queue.job_ids.count(state.callbacks["on_success"]) == 1  # pushed once


def test_the_members_carry_the_batch_in_their_meta_and_other_jobs_do_not(queue_redis, record):
    outside = queues.enqueue("default", MEMBER, record, 0)
    with queues.batch() as b:
        inside = queues.enqueue("default", MEMBER, record, 1)
    assert fetch_job(inside.id).meta[jobmeta.BATCH] == b.id
    assert jobmeta.BATCH not in fetch_job(outside.id).meta


def test_options_inside_a_batch_make_members(queue_redis, record, transactional_db):
    with queues.batch(on_complete=on("complete", record)) as b:
        delayed = queues.enqueue("default", MEMBER, record, 1, delay=3600)
        high = queues.enqueue("default", MEMBER, record, 2, priority=5)
        first = queues.enqueue("default", MEMBER, record, 3, unique="u-1")
        again = queues.enqueue("default", MEMBER, record, 4, unique="u-1")  # the waiting one: no new member
        durable = queues.enqueue("default", MEMBER, record, 7, durable=True)
        limited = queues.enqueue("default", MEMBER, record, 8, limit_key="seller:1", limit_concurrency=1)
        with transaction.atomic():
            outboxed = queues.enqueue("default", MEMBER, record, 5)
        with transaction.atomic():
            queues.enqueue("default", MEMBER, record, 6)
            transaction.set_rollback(True)  # rolled back: no job, no member
    assert again.id == first.id
    members = {m.decode() for m in queue_redis.smembers(set_keys(b.id)[1])}
    assert members == {delayed.id, high.id, first.id, outboxed.id, durable.id, limited.id}
    assert fetch_job(outboxed.id).meta[jobmeta.BATCH] == b.id  # pushed from the outbox at the commit
    assert fetch_job(durable.id).meta[jobmeta.BATCH] == b.id
    assert queues.batch_state(b.id).total == 6
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.finished, state.pending) == (5, 1)  # all but the delayed one
    assert callbacks(record) == []


def test_a_block_inside_a_transaction_is_sealed_at_the_commit(queue_redis, record, transactional_db):
    with transaction.atomic():
        with queues.batch() as b:
            job = queues.enqueue("default", MEMBER, record, 1)
        assert queues.batch_state(b.id).state == "open"  # not sealed before the commit
    state = queues.batch_state(b.id)
    assert (state.state, state.total) == ("running", 1)
    assert fetch_job(job.id).meta[jobmeta.BATCH] == b.id


def test_an_exception_in_the_block_keeps_the_members_enqueued_and_seals_the_batch(queue_redis, record):
    with pytest.raises(ZeroDivisionError):
        with queues.batch(on_success=on("success", record)) as b:
            queues.enqueue("default", MEMBER, record, 1)
            1 / 0  # noqa: B018
    assert (queues.batch_state(b.id).state, queues.batch_state(b.id).total) == ("running", 1)
    run_burst(queue_redis)
    assert callbacks(record) == [("success", b.id, "1", "0")]


def test_a_dead_member_fires_on_death_and_on_complete_and_a_retry_then_fires_on_success_once(
    queue_redis, record, tmp_path, transactional_db
):
    flag = tmp_path / "flag"
    with queues.batch(
        on_success=on("success", record), on_complete=on("complete", record), on_death=on("death", record)
    ) as b:
        queues.enqueue("default", MEMBER, record, 1)
        failing = queues.enqueue("default", "tests.jobs.batches.fail_until", record, str(flag), attempts=1)
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.finished, state.dead, state.pending) == ("completed_with_dead", 1, 1, 0)
    assert sorted(c[:2] for c in callbacks(record)) == [("complete", b.id), ("death", b.id)]
    assert state.fired.keys() == {"on_complete", "on_death"}  # on_success waits: the dead member may be retried

    flag.write_text("ok")
    row = DeadLetter.objects.get(job_id=failing.id)
    assert retry_dead_letter(row.pk).outcome == "ok"
    run_burst(queue_redis)

    state = queues.batch_state(b.id)
    assert (state.state, state.finished, state.dead) == ("succeeded", 2, 0)
    kinds = [c[0] for c in callbacks(record)]
    assert sorted(kinds) == ["complete", "death", "success"]  # on_success once, the others not again


def test_a_discarded_dead_member_leaves_the_batch_completed_with_dead(queue_redis, record, tmp_path, transactional_db):
    with queues.batch(on_success=on("success", record), on_complete=on("complete", record)) as b:
        failing = queues.enqueue("default", "tests.jobs.batches.fail_until", record, str(tmp_path / "no"), attempts=1)
    run_burst(queue_redis)
    assert discard_dead_letter(DeadLetter.objects.get(job_id=failing.id).pk).outcome == "ok"
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.dead, state.finished) == ("completed_with_dead", 1, 0)
    assert [c[0] for c in callbacks(record)] == ["complete"]


def test_cancel_cancels_the_waiting_members_and_no_callback_fires(queue_redis, record, rf, transactional_db):
    with queues.batch(on_success=on("success", record), on_complete=on("complete", record)) as b:
        jobs = [queues.enqueue("default", MEMBER, record, i) for i in range(3)]
        later = queues.enqueue("default", MEMBER, record, 9, delay=3600)
    request = rf.post("/")
    request.user = None
    result = queues.cancel_batch(b.id, request=request, reason="test")
    assert result.ok and set(result.canceled) == {j.id for j in [*jobs, later]}
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.canceled, state.pending, state.finished) == ("canceled", 4, 0, 0)
    assert set(state.fired.values()) == {"never"}
    assert callbacks(record) == [] and lines(record) == []
    assert fetch_job(later.id).get_status() == "canceled"
    entry = AuditEntry.objects.get(action="cancel_batch")
    assert entry.job_ids[0] == b.id and "4 members canceled" in entry.detail
    assert queues.cancel_batch(b.id).outcome == "canceled" and not queues.cancel_batch("nope").ok


def test_a_member_adds_to_its_own_batch_from_inside(queue_redis, record):
    with queues.batch(on_success=on("success", record)) as b:
        queues.enqueue("default", "tests.jobs.batches.fan_out", record, 4)
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.finished) == ("succeeded", 5, 5)
    assert callbacks(record) == [("success", b.id, "5", "0")]
    assert lines(record).index("parent") < lines(record).index(f"success {b.id} 5 0")


def test_unknown_batch_state_is_none(queue_redis):
    assert queues.batch_state("no-such-batch") is None


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: queues.call("default", "tests.jobs.batches.not_a_job"), "not_a_job"),
        (lambda: queues.call("no-such-queue", CALLBACK), "no-such-queue"),
        (lambda: queues.call("default", CALLBACK, object()), "argument 0"),
        (lambda: queues.call("default", CALLBACK, "p", "k", batch_id="x"), "batch_id"),
        (lambda: queues.batch(on_success="tests.jobs.batches.callback"), "on_success must be queues.call"),
        (lambda: queues.batch(on_death=print), "on_death must be queues.call"),
        (lambda: queues.batch(meta={"queue": "x"}), "queues.owner_meta"),
        (lambda: queues.current_batch(), "outside a running job"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_the_fix(make, message):
    with pytest.raises(queues.QueuesError, match=message):
        make()


def test_meta_batch_is_refused_in_a_callers_meta():
    with pytest.raises(queues.InvalidJob, match="'batch'"):
        queues.enqueue_call("default", MEMBER, ["p", 1], meta={"batch": "x"})


def test_a_succeeded_batch_keeps_only_its_hash_which_expires_with_the_retention(queue_redis, record):
    with queues.batch(on_success=on("success", record)) as b:
        queues.enqueue_many("default", MEMBER, [(record, i) for i in range(20)])
    run_burst(queue_redis)
    batch_key, *sets, _counts = set_keys(b.id)
    assert queue_redis.exists(*sets) == 0  # members, done, dead, adders, canceled: dropped at the end
    assert 0 < queue_redis.ttl(batch_key) <= 24 * 3600  # the default queue's result_ttl
    state = queues.batch_state(b.id)
    assert (state.state, state.total, state.finished, state.pending) == ("succeeded", 20, 20, 0)


def test_a_registered_worker_that_does_not_count_members_is_warned_of_once(queue_redis, caplog):
    from queues.keyspace import keys

    older = keys.worker_key("older-release-worker")
    queue_redis.sadd(keys.workers_key(), older)  # registered by a release without the batches hook
    queue_redis.hset(keys.batch_workers_key(), keys.worker_key("this-release-worker"), 1)
    queue_redis.sadd(keys.workers_key(), keys.worker_key("this-release-worker"))
    try:
        with caplog.at_level("WARNING", logger="queues.workflows"):
            for _ in range(2):
                with queues.batch():
                    pass
        warnings = [r.getMessage() for r in caplog.records if r.name == "queues.workflows"]
        assert len(warnings) == 1 and "older-release-worker" in warnings[0]
        assert "this-release-worker" not in warnings[0]
    finally:
        queue_redis.srem(keys.workers_key(), older, keys.worker_key("this-release-worker"))


def test_a_member_canceled_on_its_own_leaves_the_batch_which_then_completes(queue_redis, record, transactional_db):
    with queues.batch(on_success=on("success", record)) as b:
        queues.enqueue("default", MEMBER, record, 1)
        later = queues.enqueue("default", MEMBER, record, 2, delay=3600)
    assert queues.cancel(later.id).ok
    state = queues.batch_state(b.id)
    assert (state.total, state.canceled, state.pending) == (1, 1, 1)
    run_burst(queue_redis)
    state = queues.batch_state(b.id)
    assert (state.state, state.finished) == ("succeeded", 1)
    assert callbacks(record) == [("success", b.id, "1", "0")]


def test_inline_runs_the_members_then_on_success_and_on_complete_and_writes_nothing(record):
    from queues.testing import inline

    with inline():
        with queues.batch(on_success=on("success", record), on_complete=on("complete", record)) as b:
            queues.enqueue("default", "tests.jobs.batches.fan_out", record, 2)
    assert lines(record) == ["member child-0", "member child-1", "parent", f"success {b.id}", f"complete {b.id}"]
