"""No job runs twice because its id was pushed again, and none is buried by an id planted in another
queue's list (issue 32, findings 1 and 12).

Whoever can write to the queues' Redis pushes back the id of a job that already ran (``RPUSH
<p>:queue:default <id>``, twice onto ``:high``, into the scheduled registry), or the id of a job that lives
in another queue. Real workers of each kind (forking, ``--no-fork``, ``--concurrency 8``) then run: the
job's function (``sample.touch``: one line per run) ran exactly once, the id is dropped with one WARNING
naming it (``gate.report_dropped``), nothing is dead-lettered, and the hash is left as it was.
"""

import datetime as dt
import logging

import pytest
from rq.registry import FailedJobRegistry, ScheduledJobRegistry

import queues
from queues.catalog.lookup import OptimaJob
from queues.failures import operations
from queues.failures.corrupt import bury_corrupt
from queues.jobs import meta as jobmeta
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.periodic.supervision import ResilientRQScheduler
from tests.jobs import sample
from tests.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

KINDS = {"forking": (), "no-fork": ("--no-fork",), "concurrency-8": ("--concurrency", "8")}


def runs(path):
    """How many times ``sample.touch(path)`` ran."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def high(queue):
    return keys.band_key(keys.queue_key(queue), jobmeta.HIGH)


def drained(connection, queue="default"):
    queue_key = keys.queue_key(queue)
    lists = (*keys.band_keys(queue_key), keys.intermediate_key(queue_key))
    return all(connection.llen(key) == 0 for key in lists)


def status(connection, job_id):
    return OptimaJob.fetch(job_id, connection=connection).get_status()


def run_until(start_worker, kind, connection, good_path, queue="default"):
    """A worker of ``kind`` on ``queue`` until a good job (touching ``good_path``) enqueued behind ran and the
    queue is drained; -> its output."""
    queues.enqueue(queue, sample.touch, str(good_path))
    worker = start_worker(queue, *KINDS[kind])
    wait_for(lambda: runs(good_path) == 1 and drained(connection, queue), timeout=60, message="the good job ran")
    worker.stop()
    return worker.log_path.read_text(errors="replace")


def dropped_lines(output, job_id):
    return [line for line in output.splitlines() if "WARNING" in line and f"Job {job_id} dropped, not run" in line]


def finished_job(start_worker, kind, connection, path):
    job = queues.enqueue("default", sample.touch, str(path))
    run_until(start_worker, kind, connection, path.with_name("first-good"))
    assert runs(path) == 1 and status(connection, job.id) == "finished"
    return job


# -- finding 1: replay ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_finished_job_pushed_back_on_its_queue_and_twice_on_its_high_band_does_not_run_again(
    kind, start_worker, queue_redis, tmp_path
):
    path = tmp_path / "ran"
    job = finished_job(start_worker, kind, queue_redis, path)
    queue_redis.rpush(keys.queue_key("default"), job.id)  # the review's values
    queue_redis.rpush(high("default"), job.id)
    queue_redis.rpush(high("default"), job.id)

    output = run_until(start_worker, kind, queue_redis, tmp_path / "good")

    assert runs(path) == 1
    assert status(queue_redis, job.id) == "finished"
    lines = dropped_lines(output, job.id)
    # Each copy dropped with a line. A worker popping one job at a time drops each as finished; the concurrent one
    # pops the three copies in one call (a job per free slot: concurrent.jobs_to_pop), and the two after the first
    # are dropped by the pop itself as copies of an id it holds, popped and not yet started (popscript.TWICE_LUA).
    twice = 2 if kind == "concurrency-8" else 0
    assert sum("is finished" in line for line in lines) == 3 - twice, output
    assert sum("(pushed twice)" in line for line in lines) == twice, output
    assert len(lines) == 3, output
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert job.id not in FailedJobRegistry("default", connection=queue_redis)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_dead_job_pushed_back_does_not_run_and_stays_a_dead_letter(kind, start_worker, queue_redis, tmp_path):
    path = tmp_path / "never"
    dead = queues.enqueue("default", sample.fail, "planted", attempts=1)
    run_until(start_worker, kind, queue_redis, tmp_path / "first-good")
    wait_for(lambda: DeadLetter.objects.filter(job_id=dead.id).exists(), message="the dead letter")
    queue_redis.rpush(keys.queue_key("default"), dead.id)
    queue_redis.rpush(high("default"), dead.id)

    output = run_until(start_worker, kind, queue_redis, tmp_path / "good")

    assert not path.exists()
    assert status(queue_redis, dead.id) == "failed"
    assert DeadLetter.objects.get(job_id=dead.id).times_dead == 1
    assert len(dropped_lines(output, dead.id)) == 2, output


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_job_started_by_a_live_worker_is_dropped_and_one_whose_worker_is_gone_runs_again(
    start_worker, queue_redis, tmp_path
):
    """At least once: a started job whose worker is gone (the abandoned scan's case after a SIGKILL) runs."""
    live, gone = tmp_path / "live", tmp_path / "gone"
    jobs = {}
    for name, path, worker in (("live", live, "w-alive"), ("gone", gone, "w-gone")):
        job = queues.enqueue("default", sample.touch, str(path))
        queue_redis.lrem(keys.queue_key("default"), 0, job.id)  # as a worker took it
        queue_redis.hset(job.key, mapping={"status": "started", "worker_name": worker})
        jobs[name] = job
    queue_redis.set(keys.alive_key("w-alive"), "1", ex=120)  # a live worker's liveness mark (worker/liveness.py)
    for job in jobs.values():
        queue_redis.rpush(keys.queue_key("default"), job.id)

    output = run_until(start_worker, "forking", queue_redis, tmp_path / "good")

    assert runs(live) == 0 and runs(gone) == 1
    assert status(queue_redis, jobs["live"].id) == "started"
    assert "by worker w-alive, which is alive" in "\n".join(dropped_lines(output, jobs["live"].id))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["forking", "no-fork"])
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_finished_job_put_back_by_one_of_the_apps_paths_runs_once_more_and_only_once(
    kind, start_worker, queue_redis, tmp_path
):
    """What a resumable job's pause (issue 34) will do: the push says so in the job (``jobs.meta.PUT_BACK``);
    the pop takes it off, so the same id pushed once more is dropped."""
    path = tmp_path / "ran"
    job = finished_job(start_worker, kind, queue_redis, path)
    queue_redis.hset(job.key, jobmeta.PUT_BACK, jobmeta.PUT_BACK_PAUSE)
    queue_redis.rpush(keys.queue_key("default"), job.id)
    run_until(start_worker, kind, queue_redis, tmp_path / "good")
    assert runs(path) == 2
    assert queue_redis.hget(job.key, jobmeta.PUT_BACK) is None

    queue_redis.rpush(keys.queue_key("default"), job.id)
    output = run_until(start_worker, kind, queue_redis, tmp_path / "good-2")
    assert runs(path) == 2
    assert len(dropped_lines(output, job.id)) == 1, output


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_popped_job_given_back_by_a_paused_queue_still_runs(start_worker, queue_redis, tmp_path):
    """The give-back marks the job (``abandoned.give_back``); a job given back while queued runs once."""
    from queues.worker.abandoned import give_back

    path = tmp_path / "ran"
    job = queues.enqueue("default", sample.touch, str(path))
    queue_key = keys.queue_key("default")
    queue_redis.lmove(queue_key, keys.intermediate_key(queue_key), "LEFT", "RIGHT")  # popped by a worker
    assert give_back(queue_redis, queue_key, job.id)
    assert queue_redis.hget(job.key, jobmeta.PUT_BACK) == jobmeta.PUT_BACK_GIVE_BACK.encode()
    run_until(start_worker, "forking", queue_redis, tmp_path / "good")
    assert runs(path) == 1


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_scheduler_does_not_move_a_finished_dead_or_foreign_job_planted_in_a_scheduled_registry(
    queue_redis, caplog, tmp_path
):
    finished = queues.enqueue("default", sample.touch, str(tmp_path / "f"))
    queue_redis.lrem(keys.queue_key("default"), 0, finished.id)
    queue_redis.hset(finished.key, "status", "finished")
    dead = queues.enqueue("default", sample.touch, str(tmp_path / "d"))
    queue_redis.lrem(keys.queue_key("default"), 0, dead.id)
    queue_redis.hset(dead.key, "status", "failed")
    foreign = queues.enqueue("repricer", sample.touch, str(tmp_path / "r"), delay=dt.timedelta(hours=1))
    due = queues.enqueue("default", sample.touch, str(tmp_path / "due"), delay=dt.timedelta(hours=1))
    registry = ScheduledJobRegistry("default", connection=queue_redis)
    queue_redis.zadd(registry.key, {finished.id: 0, dead.id: 0, foreign.id: 0, due.id: 0})

    scheduler = ResilientRQScheduler(["default"], connection=queue_redis)
    assert scheduler.acquire_locks() == {"default"}
    with caplog.at_level(logging.WARNING, logger="queues.worker"):
        scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()

    queued = queue_redis.lrange(keys.queue_key("default"), 0, -1)
    assert queued == [due.id.encode()]  # the real due job moved; none of the planted ones
    assert status(queue_redis, finished.id) == "finished" and status(queue_redis, dead.id) == "failed"
    assert status(queue_redis, foreign.id) == "scheduled"
    assert foreign.id in ScheduledJobRegistry("repricer", connection=queue_redis)  # it lives where it lived
    assert len(registry) == 0
    for job_id in (finished.id, dead.id, foreign.id):
        assert len([r for r in caplog.records if f"Job {job_id} dropped, not run" in r.getMessage()]) == 1


# -- finding 12: an id planted in another queue's band ---------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_job_scheduled_on_repricer_pushed_to_defaults_high_band_is_neither_run_nor_buried(
    kind, start_worker, queue_redis, tmp_path
):
    path = tmp_path / "repriced"
    job = queues.enqueue("repricer", sample.touch, str(path), delay=dt.timedelta(hours=1))
    queue_redis.rpush(high("default"), job.id)  # the review's values

    output = run_until(start_worker, kind, queue_redis, tmp_path / "good")

    assert not path.exists()
    assert not DeadLetter.objects.filter(job_id=job.id).exists()
    assert job.id not in FailedJobRegistry("default", connection=queue_redis)
    assert job.id in ScheduledJobRegistry("repricer", connection=queue_redis)
    assert status(queue_redis, job.id) == "scheduled"
    assert "its hash belongs to queue repricer" in "\n".join(dropped_lines(output, job.id)), output

    # and it still runs where it lives, once
    queue_redis.zadd(ScheduledJobRegistry("repricer", connection=queue_redis).key, {job.id: 0})
    scheduler = ResilientRQScheduler(["repricer"], connection=queue_redis)
    assert scheduler.acquire_locks() == {"repricer"}
    scheduler.enqueue_scheduled_jobs()
    scheduler.release_locks()
    run_until(start_worker, kind, queue_redis, tmp_path / "good-repricer", queue="repricer")
    assert runs(path) == 1


@pytest.mark.parametrize("plant_status", ["scheduled", "queued", "finished"])
def test_discarding_a_dead_letter_of_a_job_that_lives_in_another_queue_closes_the_row_and_keeps_the_job(
    plant_status, queue_redis, tmp_path
):
    """The dead letter an earlier release wrote for the planted id (``corrupt`` in ``default``): its discard
    closes the row only."""
    job = queues.enqueue("repricer", sample.touch, str(tmp_path / "r"), delay=dt.timedelta(hours=1))
    queue_redis.hset(job.key, "status", plant_status)
    row = bury_corrupt(queue_redis, job.id, "default", queue_redis.hgetall(job.key), "names origin 'repricer'")

    outcome = operations.discard_dead_letter(row.pk)

    assert outcome.outcome == "ok" and "job kept: it belongs to queue repricer" in outcome.detail
    assert queue_redis.exists(job.key)
    assert job.id in ScheduledJobRegistry("repricer", connection=queue_redis)
    assert job.id not in FailedJobRegistry("default", connection=queue_redis)
    assert DeadLetter.objects.get(pk=row.pk).status == DeadLetter.Status.DISCARDED


def test_discarding_a_dead_letter_whose_job_is_queued_again_keeps_the_job_and_a_dead_one_is_deleted(
    queue_redis, tmp_path
):
    live = queues.enqueue("default", sample.touch, str(tmp_path / "l"))
    row = bury_corrupt(queue_redis, live.id, "default", queue_redis.hgetall(live.key), "planted")
    outcome = operations.discard_dead_letter(row.pk)
    assert "job kept: it is queued in queue default" in outcome.detail
    assert queue_redis.exists(live.key)

    dead = queues.enqueue("default", sample.touch, str(tmp_path / "d"))
    queue_redis.hset(dead.key, "status", "failed")
    row = bury_corrupt(queue_redis, dead.id, "default", queue_redis.hgetall(dead.key), "dead")
    assert "job deleted" in operations.discard_dead_letter(row.pk).detail
    assert not queue_redis.exists(dead.key)


@pytest.mark.parametrize("how", ["delete all failed", "bulk delete"])
def test_the_panels_delete_of_defaults_failed_jobs_keeps_a_job_that_lives_in_repricer(
    how, settings, queue_redis, tmp_path
):
    from django.test import Client

    settings.OPTIMA_ENV = "dev"  # the panel without a login (tests/queues/board)
    default_index = 1  # django-rq numbers queues by sorted name: content 0, default 1, ...
    job = queues.enqueue("repricer", sample.touch, str(tmp_path / "r"), delay=dt.timedelta(hours=1))
    row = bury_corrupt(queue_redis, job.id, "default", queue_redis.hgetall(job.key), "names origin 'repricer'")
    mine = queues.enqueue("default", sample.touch, str(tmp_path / "d"))
    queue_redis.lrem(keys.queue_key("default"), 0, mine.id)
    queue_redis.hset(mine.key, "status", "failed")
    queue_redis.zadd(keys.failed_key("default"), {mine.id: "+inf"})

    if how == "delete all failed":
        response = Client().post(f"/admin/queues/queues/{default_index}/failed/clear/")
    else:
        response = Client().post(
            f"/admin/queues/queues/actions/{default_index}/", {"action": "delete", "job_ids": [job.id, mine.id]}
        )
    assert response.status_code == 302

    assert queue_redis.exists(job.key) and job.id in ScheduledJobRegistry("repricer", connection=queue_redis)
    assert job.id not in FailedJobRegistry("default", connection=queue_redis)
    assert not queue_redis.exists(mine.key)  # default's own failed job is deleted as before
    assert DeadLetter.objects.get(pk=row.pk).status == DeadLetter.Status.DISCARDED


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_finished_jobs_id_added_to_rq_schedulers_set_is_removed_and_never_run(queue_redis, tmp_path, caplog):
    """rq-scheduler (periodic jobs) runs declared schedules only (``periodic/run.py``): a planted member is
    removed with an ERROR naming it, nothing of it run."""
    from queues.periodic.plan import scheduled_jobs_key
    from queues.periodic.run import PeriodicScheduler

    path = tmp_path / "ran"
    job = queues.enqueue("default", sample.touch, str(path))
    queue_redis.lrem(keys.queue_key("default"), 0, job.id)
    queue_redis.hset(job.key, "status", "finished")
    queue_redis.zadd(scheduled_jobs_key(), {job.id: 0})

    scheduler = PeriodicScheduler(queue_name="default", connection=queue_redis, interval=5, job_class=OptimaJob)
    with caplog.at_level(logging.ERROR):
        scheduler.enqueue_jobs()

    assert queue_redis.zscore(scheduled_jobs_key(), job.id) is None
    assert all(queue_redis.llen(key) == 0 for key in keys.band_keys(keys.queue_key("default")))
    assert status(queue_redis, job.id) == "finished"
    assert len([r for r in caplog.records if job.id in r.getMessage()]) == 1


@pytest.mark.parametrize("blocking", [False, True])
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_copy_of_an_id_popped_and_not_yet_started_is_taken_off_by_the_next_pop(
    blocking, queue_redis, tmp_path, caplog
):
    """Two workers popping two copies of a queued job's id before either starts it: the second copy is taken
    off in the pop (the id is in the intermediate list already), so one of them runs it."""
    from queues.catalog.lookup import get_queue
    from queues.worker.dequeue import Dequeuer

    job = queues.enqueue("default", sample.touch, str(tmp_path / "ran"))
    queue_key = keys.queue_key("default")
    default = get_queue("default")
    first = Dequeuer(queue_redis).pop([default], None)
    assert tuple(first) == (default, job.id)
    if blocking:  # the copy pushed during the second worker's BLMOVE
        import threading

        threading.Timer(0.3, lambda: queue_redis.rpush(queue_key, job.id)).start()
    else:  # the copies pushed while the first is popped, not started
        queue_redis.rpush(queue_key, job.id)
        queue_redis.rpush(high("default"), job.id)
    with caplog.at_level(logging.WARNING, logger="queues.worker"):
        again = Dequeuer(queue_redis).pop([default], 1 if blocking else None)
    assert again is None
    assert queue_redis.lrange(keys.intermediate_key(queue_key), 0, -1) == [job.id.encode()]  # the first's
    assert all(queue_redis.llen(key) == 0 for key in keys.band_keys(queue_key))
    dropped = [r for r in caplog.records if f"Job {job.id} dropped, not run" in r.getMessage()]
    assert len(dropped) == (1 if blocking else 2) and "pushed twice" in dropped[0].getMessage()


@pytest.mark.slow
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_queued_job_whose_id_is_pushed_twice_more_on_its_high_band_runs_once_on_a_concurrent_worker(
    start_worker, queue_redis, tmp_path
):
    path = tmp_path / "ran"
    job = queues.enqueue("default", sample.touch, str(path))
    queue_redis.rpush(high("default"), job.id, job.id)
    run_until(start_worker, "concurrency-8", queue_redis, tmp_path / "good")
    assert runs(path) == 1
