"""One attempt of a job: its start on both sides of the fork, and its success.

- In the worker (``begin``): rq's ``prepare_execution`` (the execution record, written as
  ``queues/jobs/execution.py`` says, the worker BUSY) plus the job leaving the intermediate list,
  in one MULTI. A stop request, or Redis going away before the MULTI is known to have landed, gives
  the job back to the head of its queue instead (``NotStarted``): a popped job is never stranded by
  this worker. The concurrent worker's main thread writes the starts of the jobs one pop took together, in one
  round trip (``begin_together``), and leaves to ``begin`` any it could not.
- In the process that runs the job (``mark_started``): rq's ``prepare_job_execution`` recorded
  through an outage (``horse.record_for``); a dead job an operator requeued starts a new life
  (its attempts counted from one again); then the hooks' ``before_process`` (``job_started``).
- In the process that ran the job (``mark_succeeded``): rq's ``handle_job_success`` recorded through
  an outage, never twice (``horse.success_recorder``); then the hooks' ``after_success`` (the job's
  outcome line, ``job_succeeded``). The worker imports none of the concerns: ``queues/events/hooks.py``.

A worker that runs its jobs in its own process writes both sides of the start in the one MULTI of
``begin``, and a success in one MULTI of its own (``fastpath.py``).

A failed attempt goes to ``failures/handler.py``.
"""

import datetime as dt

import redis
from rq.job import JobStatus
from rq.utils import now
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.connection import batch
from queues.connection.outage import REDIS_ERRORS, wait_until_reachable
from queues.events import hooks
from queues.failures.handler import duration
from queues.jobs import execution as execution_record
from queues.jobs import meta as jobmeta
from queues.jobs.execution import Execution
from queues.keyspace import keys, quarantine
from queues.worker import fastpath, horse, popstart
from queues.worker.abandoned import give_back


class NotStarted(Exception):
    """A dequeued job went back to its queue instead of starting (stop request, outage)."""


def begin(worker, job):
    """The job's rq Execution, recorded as started; raises NotStarted when it went back instead."""
    queue_key = keys.queue_key(job.origin)
    popped = popstart.taken(job)
    if worker.stop.requested:
        if popped is not None:
            try:
                worker.intake.unstart(popped[0], popped)
            except REDIS_ERRORS:
                raise NotStarted() from None  # left started by this stopping worker: the scan runs it once it is gone
        _give_back(worker, job, queue_key, "the worker is stopping")
        raise NotStarted()
    if popped is not None:  # its pop wrote the start (popstart.py)
        return popstart.adopt(worker, job, popped.started)
    created = []

    def record():
        with worker.connection.pipeline() as pipe:
            created.append(_start_into(worker, job, pipe, busy=True))
            batch.execute(worker.connection, pipe)  # the MULTI's commands in one Lua call
        worker.intake.busy_written = worker.outage.episodes
        return created[-1]

    try:  # a key of another type (planted) is set aside and the MULTI runs again (its LREM is then a no-op)
        execution = quarantine.retry_once(
            worker.connection,
            lambda: quarantine.starting(worker, job),
            record,
            who=f"Worker {worker.name}",
            log=worker.log,
        )
    except REDIS_ERRORS as exc:
        execution = created[-1] if created else None
        worker.outage.failed(exc, f"start job {job.id}")
        if not wait_until_reachable(
            worker.connection, worker.backoff, worker.outage, should_stop=lambda: worker.stop.requested
        ):
            raise NotStarted() from None  # still in the intermediate list: the abandoned-job scan returns it
        if execution is None or worker.connection.zscore(job.started_job_registry.key, execution.composite_key) is None:
            _give_back(worker, job, queue_key, "Redis was unreachable when it was to start")
            raise NotStarted() from None
    worker.executions[execution.id] = execution
    return execution


def _start_into(worker, job, pipe, busy):
    """Queue on ``pipe`` the start of ``job`` (its execution, the started registry, the id out of the intermediate
    list, the job STARTED or named) and, when ``busy`` and it is not written already, the worker BUSY -> the
    execution."""
    execution = Execution.create(
        job,
        worker.get_heartbeat_ttl(job),
        pipeline=pipe,
        worker_name=worker.name,
        rq_records=worker.resilience.rq_execution_records,
    )
    if busy and (worker.get_state() != WorkerStatus.BUSY or worker.intake.busy_lost()):
        worker.set_state(WorkerStatus.BUSY, pipeline=pipe)  # not again for each job of a drain (issue 36)
    pipe.lrem(keys.intermediate_key(keys.queue_key(job.origin)), 1, job.id)
    if worker.runs_jobs_in_process:  # no horse to write its side of the start: written here
        fastpath.started_into(worker, job, pipe, execution)
    else:
        execution_record.named_into(job, execution, pipe)
    return execution


def begin_together(worker, jobs):
    """The starts of several jobs (those one pop took: the concurrent worker's main thread) in one call of the batch
    script, each as ``begin`` writes it -> per job its execution, recorded as started, or None: its start left to
    ``begin`` in the job's thread, as before (a stop asked for, a command of its start refused, Redis away:
    ``begin``'s own handling of each). A job's commands that failed fail alone, as in a MULTI: the other jobs start;
    one of its commands that did apply beside the error (its started entry) is left stale, and the abandoned-job scan
    drops it, as after ``begin``'s own retry past a planted key. Saves each job's thread its own start's round
    trip and the hand-overs of sharing it, and Redis a script call a job (issue 36)."""
    if worker.stop.requested or not jobs:
        return [None] * len(jobs)
    with worker.connection.pipeline() as pipe:
        executions, ends = [], []
        for number, job in enumerate(jobs):
            executions.append(_start_into(worker, job, pipe, busy=number == 0))
            ends.append(len(pipe.command_stack))
        if not batch.runs_as_a_script(pipe):
            return [None] * len(jobs)
        try:
            replies = batch.execute_each(worker.connection, pipe)
        except redis.RedisError:  # Redis away, or the call refused: whether any landed is each thread's to check
            return [None] * len(jobs)
    started, first = [], 0
    for execution, end in zip(executions, ends):
        if any(replies[first:end]):  # an error in one of this job's commands
            started.append(None)
        else:
            worker.executions[execution.id] = execution
            started.append(execution)
        first = end
    if started[0] is not None:
        worker.intake.busy_written = worker.outage.episodes
    return started


def _give_back(worker, job, queue_key, why):
    try:
        if give_back(worker.connection, queue_key, job.id):
            worker.log.info(
                "Worker %s: job %s back at the head of its queue, not started: %s", worker.name, job.id, why
            )
    except REDIS_ERRORS:
        pass  # left in the intermediate list: the abandoned-job scan returns it


def mark_started(worker, job, rq_prepare):
    """In the job's process: ``rq_prepare()`` (rq's ``prepare_job_execution``, which must not touch
    the intermediate list: the worker took the job out of it) recorded through an outage; in a worker
    that runs its jobs itself ``begin`` wrote it already."""
    if worker.runs_jobs_in_process:
        worker.procline(f"Processing {job.func_name} from {job.origin}")
    else:
        horse.record_for(worker, rq_prepare, f"mark job {job.id} started")
    if jobmeta.new_life(job.meta, requeued_at=_timestamp(job.enqueued_at)):
        try:
            job.save_meta()
        except Exception:  # noqa: BLE001 — the attempt counter is not worth failing the job for
            worker.log.exception("Could not reset the attempts of requeued dead job %s", job.id)
    hooks.before_process(job, jobmeta.queue_name(job))


def ended_quietly(worker, job):
    """True when the job that just returned needs no write of rq's ``handle_execution_ended`` (its
    ``last_heartbeat`` field, written on its own): a success that ``fastpath.finish`` records, with no
    success callback to run first; its end is then only noted, and written by that MULTI."""
    if job.get_status(refresh=False) != JobStatus.STARTED or rqcompat.callback_names(job)[0]:
        return False  # a failure (rq set FAILED first), or a callback that runs before the success is written
    if not fastpath.eligible(worker, job):
        return False
    job.ended_at = job.last_heartbeat = now()
    return True


def mark_succeeded(worker, job, queue, execution, rq_success):
    """In the job's process: ``rq_success()`` (rq's ``handle_job_success``), or ``fastpath.finish``
    with what the hooks counted of this success (``before_success_write``), recorded through an outage."""
    name, seconds = jobmeta.queue_name(job), duration(job)
    record, carried = rq_success, False
    if fastpath.eligible(worker, job):
        hooks.before_success_write(job, name, seconds)
        record, carried = (lambda: fastpath.finish(worker, job, queue, execution)), True
    horse.record_for(worker, horse.success_recorder(record, job), f"record the success of job {job.id}")
    hooks.after_success(job, name, seconds, carried)  # the job's one line, job_succeeded


def _timestamp(when):
    """Unix seconds of rq's naive-UTC (or aware) datetime, None for None."""
    if when is None:
        return None
    return when.replace(tzinfo=when.tzinfo or dt.UTC).timestamp()
