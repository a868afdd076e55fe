"""After a work horse ended, in the forking worker's main process: making sure its job ended somewhere.

``watch`` waits for the horse (``supervision.HorseWatch``). A horse that exited 0 and was not
interrupted recorded its job's outcome itself: nothing more, not even a Redis command. Otherwise
``settle`` reads the job's status and started entry, asks ``supervision.verdict`` what is left to
do, and does it (``ACTIONS``: one function per ``Action``), waiting for Redis as long as it takes —
unless the worker is stopping: then for the grace period once more (5 s after a second signal),
after which the job stays registered as started for the other workers to re-run.

``outcome_lost``: the outcome of a job could not be written (e.g. its retry could not be scheduled).
"""

import os
import time
from dataclasses import dataclass

from redis import ResponseError
from rq.exceptions import InvalidJobOperation
from rq.job import JobStatus
from rq.utils import now

from queues import rqcompat
from queues.connection.outage import REDIS_ERRORS, wait_until_reachable
from queues.jobs import meta as jobmeta
from queues.keyspace import quarantine
from queues.worker import horse, supervision
from queues.worker.supervision import Action

STOPPED_BY_USER = "Job stopped by user, work-horse terminated."  # rq's own text


@dataclass(frozen=True)
class Ended:
    """A work horse that ended: its job, and what the worker saw of its end."""

    job: object
    queue: object
    execution: object
    pid: int
    wait_status: object  # None: reaped elsewhere
    rusage: object
    interrupted: object  # why the worker ended it on purpose, or None


def watch(worker, job, queue, execution):
    """Wait for the horse of ``job``, then settle what it left undone."""
    job.started_at = now()
    watcher = supervision.HorseWatch(
        rqcompat.horse_pid(worker),
        stop=worker.stop,
        kill=worker.kill_horse,
        beat=lambda: worker.maintain_heartbeats(job, execution),
        tick=worker.housekeeping.tick,
        beat_interval=worker.job_monitoring_interval,
        job_timeout=job.timeout,
        log=worker.log,
        worker_name=worker.name,
        job_id=job.id,
    )
    pid, wait_status, rusage = watcher.wait()
    rqcompat.set_horse_pid(worker, 0)
    worker.executions.pop(execution.id, None)
    ended = Ended(job, queue, execution, pid, wait_status, rusage, worker.stop.take_interrupted())
    if ended.interrupted is None and supervision.exit_code(wait_status) == 0:
        return  # the horse recorded the outcome itself
    settle(worker, ended)


def settle(worker, ended):
    """``settle_once`` until it went through, or until a stopping worker gives up."""
    give_up_at = None
    while True:
        limit = worker.stop.settle_deadline()
        if give_up_at is None and limit is not None:
            give_up_at = time.monotonic() + limit
        if give_up_at is not None and time.monotonic() >= give_up_at:
            worker.log.error(
                "Worker %s: Redis unreachable; job %s stays registered as started and the other "
                "workers will re-run or dead-letter it once this one is gone",
                worker.name,
                ended.job.id,
            )
            return
        if not wait_until_reachable(worker.connection, worker.backoff, worker.outage, deadline=time.monotonic() + 5):
            continue
        try:
            return settle_once(worker, ended)
        except REDIS_ERRORS as exc:
            worker.outage.failed(exc, f"settle job {ended.job.id}")
        except ResponseError as exc:  # a key of another type (planted): set aside, then once more
            who = f"Worker {worker.name}"
            expected = quarantine.running(worker, ended.job, ended.execution)
            if not (
                quarantine.is_wrong_type(exc)
                and quarantine.set_aside(worker.connection, expected, who=who, log=worker.log)
            ):
                quarantine.report(exc, who=who, what="settle a job whose horse ended", log=worker.log)
                return None


def settle_once(worker, ended):
    job = ended.job
    try:
        status = job.get_status(refresh=True)
    except InvalidJobOperation:
        return supervision.forget(worker.connection, job, ended.execution)  # deleted meanwhile
    verdict = supervision.verdict(
        status=status,
        registered=_registered(worker, ended),
        wait_status=ended.wait_status,
        interrupted=ended.interrupted,
        stopped=rqcompat.stopped_job_id(worker) == job.id,
    )
    ACTIONS[verdict.action](worker, ended, verdict.why)


def _requeue(worker, ended, why):
    # Back to the head of the job's priority band (``return_to_queue`` pushes to ``queue.key``).
    band = ended.queue.band(jobmeta.band(ended.job)) if hasattr(ended.queue, "band") else ended.queue
    supervision.return_to_queue(worker.connection, ended.job, band, ended.execution, why)
    worker.log.warning(
        "Worker %s: job %s back at the head of %s, attempt not counted: %s",
        worker.name,
        ended.job.id,
        ended.queue.name,
        why,
    )


def _fail(worker, ended, why):
    """The horse died mid-job (a signal, a crash): rq's bookkeeping of a killed horse, then the
    failure path (retry or dead letter)."""
    _failed(worker, ended, why)
    worker.handle_work_horse_killed(ended.job, ended.pid, ended.wait_status, ended.rusage)
    worker.handle_job_failure(ended.job, queue=ended.queue, exc_string=why, execution=ended.execution)
    _back_if_unrecorded(worker, ended)


def _stopped(worker, ended, why):
    """rq's stop-job command ended the job: failed, never retried (``FailureHandler.judge``)."""
    _failed(worker, ended, STOPPED_BY_USER)
    worker.handle_job_failure(ended.job, queue=ended.queue, exc_string=STOPPED_BY_USER, execution=ended.execution)
    rqcompat.forget_stopped_job(worker)
    _back_if_unrecorded(worker, ended)


def _forget(worker, ended, why):
    supervision.forget(worker.connection, ended.job, ended.execution)


def _nothing(worker, ended, why):
    pass


ACTIONS = {
    Action.REQUEUE: _requeue,
    Action.FAIL: _fail,
    Action.STOPPED: _stopped,
    Action.FORGET: _forget,
    Action.NONE: _nothing,
}


def _failed(worker, ended, why):
    ended.job.ended_at = now()
    worker.log.warning("Worker %s: job %s failed (%s)", worker.name, ended.job.id, why)


def _registered(worker, ended):
    return worker.connection.zscore(ended.queue.started_job_registry.key, ended.execution.composite_key) is not None


def _back_if_unrecorded(worker, ended):
    """The failure could not be recorded (still registered and STARTED): back to its queue."""
    if _registered(worker, ended) and ended.job.get_status(refresh=True) == JobStatus.STARTED:
        supervision.return_to_queue(
            worker.connection, ended.job, ended.queue, ended.execution, "its failure could not be recorded"
        )


def outcome_lost(worker, job, queue, execution, why):
    """The job's outcome could not be written: in a horse, exit EX_TEMPFAIL (the worker puts it
    back); in the worker's process, put it back now."""
    if worker.is_horse:
        os._exit(horse.EX_TEMPFAIL)
    try:
        supervision.return_to_queue(worker.connection, job, queue, execution, why)
    except REDIS_ERRORS:
        pass  # still registered as started: re-run by the scan once this worker is gone
