"""The trust boundary, worker side: only declared, signed, readable jobs run (queues/jobs/gate.py).

Each test plants what someone with write access to the queues' Redis could write, next to a good
job enqueued after it, and runs a real worker (in this process, forking its work horses): the
planted job never runs (nothing it names is imported), it is dead-lettered with its reason or
dropped with an ERROR naming the key, and the worker goes on to run the good job.
"""

import datetime as dt
import logging
import sys
import zlib

import pytest
from rq.job import JobStatus

import queues
from queues.catalog import jobs as catalog
from queues.catalog.lookup import OptimaJob, get_queue
from queues.exceptions import InvalidJob, NotAJob
from queues.failures.deadletter import decode_raw_hash
from queues.jobs import signing
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.worker.adapter import OptimaWorker
from tests.jobs import sample
from tests.support import child_json
from tests.support.worker import plant, run_burst

pytestmark = pytest.mark.django_db(transaction=True)


@queues.job
def declared_outside_a_job_module():
    """Decorated, but tests.queues.jobs.test_gate is no job module: not a job."""


def good_job():
    return queues.enqueue("default", sample.add, 2, 3)


def assert_ran(connection, job):
    assert OptimaJob.fetch(job.id, connection=connection).return_value() == 5


def assert_dead(connection, job_id, reason):
    job = OptimaJob.fetch(job_id, connection=connection)
    assert job.get_status() == JobStatus.FAILED
    assert job.meta["dead"] == reason
    assert job_id in get_queue("default", connection=connection).failed_job_registry
    row = DeadLetter.objects.get(job_id=job_id)
    assert (row.reason, row.status) == (reason, "open")
    return row


# -- declared jobs ------------------------------------------------------------------------------


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_job_modules_are_each_apps_jobs_module_plus_queue_job_modules():
    assert {"features.orders.jobs", "features.repricer.jobs", "features.content.jobs", "tests.jobs"} <= set(
        catalog.job_modules()
    )
    assert catalog.is_declared("features.orders.jobs.sync_cabinet")
    assert catalog.is_declared("tests.jobs.resilience.runs")  # a submodule of a job package
    assert not catalog.is_declared("features.repricer.jobs.marketplace_key")  # a helper, not decorated
    assert not catalog.is_declared("tests.queues.jobs.test_gate.declared_outside_a_job_module")


@pytest.mark.parametrize(
    "func, says",
    [
        ("os.system", "'os.system' is not a declared job: decorate a module-level function"),
        ("features.repricer.jobs.marketplace_key", "is not a declared job"),
        (
            declared_outside_a_job_module,
            "carries @queues.job but 'tests.queues.jobs.test_gate' is not a job module: move it"
            " into an app's jobs.py, or add 'tests.queues.jobs.test_gate' to the setting "
            "QUEUE_JOB_MODULES",
        ),
        (sorted, "is not a declared job"),
    ],
)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_enqueue_refuses_what_is_not_a_declared_job_saying_how_to_declare_it(func, says, queue_redis):
    with pytest.raises(InvalidJob) as excinfo:
        queues.enqueue("default", func, 1)
    assert says in str(excinfo.value)
    assert queue_redis.llen(keys.queue_key("default")) == 0


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_enqueue_of_an_undeclared_path_imports_nothing():
    assert "this" not in sys.modules  # the stdlib's Zen of Python: importing it prints
    with pytest.raises(InvalidJob):
        queues.enqueue("default", "this.s")
    assert "this" not in sys.modules


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_decorator_returns_the_function_itself_and_refuses_what_cannot_be_a_job():
    assert sample.add(1, 2) == 3 and getattr(sample.add, catalog.MARK)
    with pytest.raises(TypeError, match="not a module-level function"):
        queues.job(lambda: None)


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_importing_a_job_module_does_not_need_django():
    code = "import bench.jobs, queues, sys, json; print(json.dumps(sorted({'django', 'rq'} & set(sys.modules))))"
    assert child_json(code) == []  # neither imported


@pytest.mark.parametrize(
    "func, args",
    [
        ("os.system", ["touch {marker}"]),
        ("builtins.eval", ["open({marker!r}, 'w')"]),
        ("subprocess.call", [["touch", "{marker}"]]),
        ("features.repricer.jobs.marketplace_key", ["{marker}", "k"]),
        ("this.s", []),
    ],
)
def test_a_job_naming_anything_but_a_declared_job_is_dead_lettered_not_a_job_unimported(
    func, args, queue_redis, tmp_path
):
    marker = tmp_path / "ran"
    args = [a.format(marker=marker) if isinstance(a, str) else [x.format(marker=marker) for x in a] for a in args]
    planted = plant(queue_redis, func, args, signed=True)  # even signed: the function is what is refused
    good = good_job()
    run_burst(queue_redis)
    assert not marker.exists()
    assert "this" not in sys.modules
    row = assert_dead(queue_redis, planted, "not_a_job")
    assert row.func_path == func and "is not a declared job" in row.traceback
    assert_ran(queue_redis, good)


@pytest.mark.parametrize("callback", ["success_callback_name", "failure_callback_name", "stopped_callback_name"])
def test_a_job_naming_an_undeclared_callback_is_dead_lettered_not_a_job(callback, queue_redis, tmp_path):
    planted = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "ran")], **{callback: "os.system"})
    good = good_job()
    run_burst(queue_redis)
    assert not (tmp_path / "ran").exists()
    row = assert_dead(queue_redis, planted, "not_a_job")
    assert "callback 'os.system' is not a declared job" in row.traceback
    assert_ran(queue_redis, good)


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_rqs_own_import_of_a_job_refuses_an_undeclared_name(queue_redis):
    # Defence in depth: a path that skipped the gate (rq's perform, a callback) still imports nothing.
    job = OptimaJob.create("os.system", args=["true"], connection=queue_redis)
    with pytest.raises(NotAJob, match="'os.system' is not a declared job"):
        _ = job.func  # the property raises
    job._success_callback_name = "os.system"
    with pytest.raises(NotAJob, match="success callback"):
        _ = job.success_callback  # the property raises
    assert OptimaJob.create("tests.jobs.sample.add", connection=queue_redis).func is sample.add


# -- signatures ---------------------------------------------------------------------------------


def test_a_declared_job_with_rewritten_arguments_is_dead_lettered_unsigned(queue_redis, tmp_path):
    queue = get_queue("default", connection=queue_redis)
    honest = queues.enqueue("default", sample.touch, str(tmp_path / "honest"))
    data = zlib.compress(f'["tests.jobs.sample.touch", null, ["{tmp_path / "forged"}"], {{}}]'.encode())
    queue_redis.hset(honest.key, "data", data)  # the signature stays: it no longer matches
    good = good_job()
    run_burst(queue_redis)
    assert list(tmp_path.iterdir()) == []
    row = assert_dead(queue_redis, honest.id, "unsigned")
    assert row.args == [str(tmp_path / "forged")]
    assert queue.count == 0
    assert_ran(queue_redis, good)


def test_a_declared_job_without_a_signature_is_dead_lettered_unsigned(queue_redis, tmp_path):
    planted = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "ran")])
    run_burst(queue_redis)
    assert not (tmp_path / "ran").exists()
    assert_dead(queue_redis, planted, "unsigned")


def test_unsigned_jobs_run_until_queue_accept_unsigned_until_and_not_after(queue_redis, tmp_path, settings, caplog):
    settings.QUEUE_ACCEPT_UNSIGNED_UNTIL = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    waiting = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "waiting")])
    with caplog.at_level(logging.WARNING):
        run_burst(queue_redis)
    assert (tmp_path / "waiting").exists()
    assert OptimaJob.fetch(waiting, connection=queue_redis).get_status() == JobStatus.FINISHED
    assert any(
        "carries no valid signature; run anyway: QUEUE_ACCEPT_UNSIGNED_UNTIL" in r.getMessage() for r in caplog.records
    )
    settings.QUEUE_ACCEPT_UNSIGNED_UNTIL = "2026-01-01T00:00:00"
    late = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "late")])
    run_burst(queue_redis)
    assert not (tmp_path / "late").exists()
    assert_dead(queue_redis, late, "unsigned")


def test_key_rotation_old_keys_still_verify_a_forgotten_key_does_not(queue_redis, settings):
    settings.QUEUE_SIGNING_KEY = "first-key-" + "x" * 40
    before_rotation = queues.enqueue("default", sample.add, 2, 3)
    settings.QUEUE_SIGNING_KEY = "second-key-" + "y" * 40
    settings.QUEUE_SIGNING_OLD_KEYS = ["first-key-" + "x" * 40]
    after_rotation = queues.enqueue("default", sample.add, 2, 3)
    run_burst(queue_redis)
    assert_ran(queue_redis, before_rotation)
    assert_ran(queue_redis, after_rotation)
    settings.QUEUE_SIGNING_OLD_KEYS = []
    signed_with_first = OptimaJob.create(
        "tests.jobs.sample.add",
        args=[2, 3],
        connection=queue_redis,
        id="first-key-job",
        origin="default",
        meta={"queue": "default"},
    )
    settings.QUEUE_SIGNING_KEY = "first-key-" + "x" * 40
    signed_with_first.signature = signing.sign(signed_with_first)
    settings.QUEUE_SIGNING_KEY = "second-key-" + "y" * 40
    signed_with_first.save()
    queue_redis.rpush(keys.queue_key("default"), signed_with_first.id)
    run_burst(queue_redis)
    assert_dead(queue_redis, signed_with_first.id, "unsigned")


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_signature_survives_retries(queue_redis):
    job = queues.enqueue("default", sample.fail, attempts=2)
    run_burst(queue_redis)
    queue_redis.zadd(get_queue("default").scheduled_job_registry.key, {job.id: 0})
    worker = OptimaWorker([get_queue("default", connection=queue_redis)], connection=queue_redis)
    worker.work(burst=True, with_scheduler=True)
    job = OptimaJob.fetch(job.id, connection=queue_redis)
    assert job.meta["dead"] == "exhausted" and job.meta["attempts_made"] == 2  # ran twice: never "unsigned"


# -- poison entries -----------------------------------------------------------------------------

POISON = {
    "garbage data": {"data": b"\x00\x01 not zlib, not json"},
    "data that is a JSON string": {"data": zlib.compress(b'"os.system"')},
    "meta that is a pickle": {"meta": b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94."},
    "a field that is not UTF-8": {"description": b"\xff\xfe bad"},
    "status that is not UTF-8": {"status": b"\xffqueued"},
}


@pytest.mark.parametrize("poison", sorted(POISON))
def test_a_poison_job_is_dead_lettered_corrupt_with_its_raw_hash_and_the_worker_goes_on(
    poison, queue_redis, tmp_path, caplog
):
    planted = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "ran")], signed=True, **POISON[poison])
    raw = queue_redis.hgetall(keys.job_key(planted))
    good = good_job()
    with caplog.at_level(logging.ERROR):
        run_burst(queue_redis)
    assert not (tmp_path / "ran").exists()
    assert_ran(queue_redis, good)
    assert queue_redis.hgetall(keys.job_key(planted)) == raw  # kept as it was, for investigation
    assert queue_redis.zscore(keys.failed_key("default"), planted) == float("inf")
    row = DeadLetter.objects.get(job_id=planted)
    assert (row.reason, row.queue) == ("corrupt", "default")
    assert dict(decode_raw_hash(row.raw_hash)) == raw
    assert any(keys.job_key(planted) in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)


def test_a_job_hash_without_data_is_dead_lettered_corrupt(queue_redis):
    queue_redis.hset(keys.job_key("no-data"), mapping={"origin": "default", "status": "queued"})
    queue_redis.rpush(keys.queue_key("default"), "no-data")
    good = good_job()
    run_burst(queue_redis)
    assert_ran(queue_redis, good)
    assert DeadLetter.objects.get(job_id="no-data").reason == "corrupt"


def test_a_job_whose_origin_is_not_the_queue_it_was_popped_from_is_dead_lettered_corrupt(queue_redis, tmp_path):
    planted = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "ran")], signed=True, origin="not-declared")
    good = good_job()
    run_burst(queue_redis)
    assert not (tmp_path / "ran").exists()
    assert_ran(queue_redis, good)
    row = DeadLetter.objects.get(job_id=planted)
    assert row.reason == "corrupt" and "names origin 'not-declared'" in row.exc_message


@pytest.mark.parametrize("entry", ["gone", "string-key", "\xff-not-utf8", "with:colon"])
def test_a_queue_entry_that_cannot_be_a_job_is_dropped_with_an_error_naming_it(entry, queue_redis, caplog):
    raw_id = entry.encode("latin-1")
    if entry == "string-key":
        queue_redis.set(keys.job_key(entry), "not a hash")
    queue_redis.rpush(keys.queue_key("default"), raw_id)
    good = good_job()
    with caplog.at_level(logging.ERROR):
        run_burst(queue_redis)
    assert_ran(queue_redis, good)
    assert queue_redis.llen(keys.queue_key("default")) == 0
    assert queue_redis.llen(keys.intermediate_key(keys.queue_key("default"))) == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert any(keys.job_key(entry) in m or repr(raw_id) in m for m in errors), errors
    assert not DeadLetter.objects.exists()


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_queue_key_of_the_wrong_type_is_set_aside_and_the_other_queues_go_on(queue_redis, caplog):
    queue_redis.hset(keys.queue_key("orders-sync"), "planted", "x")
    good = good_job()
    with caplog.at_level(logging.ERROR):
        run_burst(queue_redis, "orders-sync", "default")
    assert_ran(queue_redis, good)
    aside = [k.decode() for k in queue_redis.keys(keys.queue_key("orders-sync") + ".corrupt-*")]
    assert len(aside) == 1 and queue_redis.hget(aside[0], "planted") == b"x"
    assert any(
        keys.queue_key("orders-sync") in r.getMessage() and "is a hash, not a list" in r.getMessage()
        for r in caplog.records
    )


# -- periodic jobs ------------------------------------------------------------------------------


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_scheduler_runs_only_declared_schedules_whatever_the_template_in_redis_says(
    queue_redis, lifecycle_schedules, tmp_path, caplog
):
    from queues.periodic import schedules

    schedules.register(queue_redis)
    # Planted: a member that is no declared schedule, and a declared one's template rewritten.
    evil = OptimaJob.create(
        "os.system",
        args=[f"touch {tmp_path / 'evil'}"],
        connection=queue_redis,
        id="schedule-evil",
        meta={"optima_schedule": "evil", "queue": "lifecycle"},
    )
    evil.save()
    rewritten = OptimaJob.fetch("schedule-tick", connection=queue_redis)
    queue_redis.hset(
        rewritten.key, "data", zlib.compress(f'["os.system", null, ["touch {tmp_path / "rewritten"}"], {{}}]'.encode())
    )
    queue_redis.zadd(schedules.scheduled_jobs_key(), {"schedule-evil": 1_700_000_000, "schedule-tick": 1_700_000_000})
    scheduler = schedules.scheduler_class()(
        queue_name="lifecycle", connection=queue_redis, interval=5, job_class=OptimaJob
    )
    with caplog.at_level(logging.ERROR):
        scheduler.enqueue_jobs()
    assert queue_redis.zscore(schedules.scheduled_jobs_key(), "schedule-evil") is None
    assert any("'schedule-evil'" in r.getMessage() or "b'schedule-evil'" in r.getMessage() for r in caplog.records)
    run = OptimaJob.fetch("schedule-tick-1700000000", connection=queue_redis)
    assert (run.func_name, run.args) == ("tests.jobs.lifecycle.quick", [1])  # the declared one
    run_burst(queue_redis, "lifecycle")
    assert list(tmp_path.iterdir()) == []


# -- planted pickles: worker, both schedulers, reconcile, the abandoned-job scan ----------------


def test_planted_pickles_run_nowhere_in_workers_schedulers_reconcile_or_the_scan(queue_redis, tmp_path):
    from rq.serializers import DefaultSerializer

    from queues.failures import deadletter
    from queues.periodic import schedules
    from queues.worker import abandoned
    from tests.support.pickles import Boom
    from tests.support.pickles import plant as plant_pickles

    trap = tmp_path / "trap"
    trap.mkdir()
    ids, _ = plant_pickles(queue_redis, trap)
    # Due now, so rq's scheduler (in the worker) and rq-scheduler both pick them up.
    queue_redis.zadd(keys.scheduled_key("default"), {ids["scheduled"]: 0})
    pickled_template = OptimaJob.create(
        "tests.jobs.sample.add",
        args=[Boom(trap / "template")],
        id="schedule-x",
        connection=queue_redis,
        serializer=DefaultSerializer,
    )
    pickled_template.save()
    queue_redis.zadd(schedules.scheduled_jobs_key(), {"schedule-x": 0})
    good = good_job()

    worker = OptimaWorker([get_queue("default", connection=queue_redis)], connection=queue_redis)
    worker.work(burst=True, with_scheduler=True)
    scheduler = schedules.scheduler_class()(
        queue_name="default", connection=queue_redis, interval=5, job_class=OptimaJob
    )
    scheduler.enqueue_jobs()
    summary = deadletter.reconcile()
    abandoned.Scan(queue_redis, ["default"], stale_after=0).run()
    run_burst(queue_redis)

    assert sorted(p.name for p in trap.iterdir()) == []
    assert_ran(queue_redis, good)
    assert summary.errors == 0
    assert DeadLetter.objects.get(job_id=ids["queued"]).reason == "corrupt"


# -- the dead-letter admin's retry of refused jobs ----------------------------------------------


def test_retry_of_an_unsigned_dead_letter_enqueues_a_new_signed_job_from_the_row(queue_redis, tmp_path):
    from queues.failures.operations import retry_dead_letter

    planted = plant(queue_redis, "tests.jobs.sample.touch", [str(tmp_path / "ran")])
    run_burst(queue_redis)
    row = assert_dead(queue_redis, planted, "unsigned")
    outcome = retry_dead_letter(row.pk, accept_unverified=True)  # the one-row retry, confirmed (issue 19)
    assert outcome.outcome == "ok" and outcome.job_id != planted, outcome
    run_burst(queue_redis)
    assert (tmp_path / "ran").exists()
    assert OptimaJob.fetch(outcome.job_id, connection=queue_redis).meta["retry_of"] == planted


def test_retry_of_a_not_a_job_dead_letter_is_refused(queue_redis):
    from queues.failures.operations import retry_dead_letter

    planted = plant(queue_redis, "os.system", ["true"], signed=True)
    run_burst(queue_redis)
    row = assert_dead(queue_redis, planted, "not_a_job")
    outcome = retry_dead_letter(row.pk)
    assert outcome.outcome == "error" and "'os.system', which is not a declared job" in outcome.detail
    assert queue_redis.llen(keys.queue_key("default")) == 0
