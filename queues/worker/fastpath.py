"""The fork-free worker's own bookkeeping of one job: started in one Lua call, a success finished in one.

rq's SimpleWorker spends a dozen round trips on a job that does nothing: its ``prepare_execution``
pipeline, then ``prepare_job_execution``'s, an unpipelined heartbeat when the job returns,
``handle_job_success``'s WATCH, SMEMBERS and MULTI, and per loop a suspension check and a state
write. A worker that runs its jobs in its own process (``OptimaSimpleWorker``, and the concurrent
worker, which runs this same path in several threads) writes the same keys in fewer trips:

======================  ========================================================================
the pop                 one Lua call: the job id into the intermediate list, its hash read back
                        (``dequeue.py``)
the start               one Lua call (``attempt.begin`` with ``started_into``): the execution, the
                        started registry, the worker BUSY, the job STARTED (rq's
                        ``prepare_for_execution``), the id out of the intermediate list
a success               one Lua call (``finish``): status, the job's hash, rq's Result stream entry,
                        the finished registry (scored to the microsecond: no re-score later), the
                        expiries, the execution removed, the worker's counters and state, the
                        limit key's slot, the hooks' writes (the metrics)
both                    the commands a MULTI would hold, run by one EVALSHA (``connection/batch.py``:
                        redis-py packs and parses one command instead of ~40)
per loop                the suspension check at most once a second; no IDLE write when the worker
                        is idle already (``intake.py``)
======================  ========================================================================

Kept: at least once (the start is one atomic call: the id leaves the intermediate list in the same
transaction that writes the started registry), the outage handling (``horse.record_for`` retries
``finish``; ``horse.success_recorder`` makes it idempotent), ``job_started`` / ``job_succeeded``, success
callbacks and webhooks (rq's ``_finalize_success`` still runs them), a job's dependents (moved by rq's
own code after the MULTI, only when the MULTI saw any). Left to rq's own path (``eligible``): a job
with ``result_ttl=0`` (rq deletes it, and its registries, on success) and a ``Repeat``. Failures keep
rq's path and ``failures/``. docs/decisions.md, "The fork-free worker's own bookkeeping".

Nothing here keeps per-job state outside its arguments: threads of one process run it at once.
"""

import time

from rq.job import JobStatus
from rq.results import Result
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.connection import batch
from queues.connection.outage import REDIS_ERRORS
from queues.events import hooks
from queues.jobs import meta as jobmeta
from queues.jobs import stream
from queues.keyspace import keys
from queues.producer import limits


def eligible(worker, job):
    """Whether ``finish`` records the success of ``job`` (else rq's ``handle_job_success`` does)."""
    if not worker.runs_jobs_in_process or job.repeats_left:
        return False
    return job.get_result_ttl(worker.default_result_ttl) != 0


def recorded(worker, job):
    """Whether ``finish`` recorded ``job``'s outcome (a success, metrics and precise score included)."""
    return job.get_status(refresh=False) == JobStatus.FINISHED and eligible(worker, job)


def started_into(worker, job, pipe):
    """Queue on ``pipe`` (the start's MULTI) what rq's ``prepare_job_execution`` writes in the job's
    process: the job STARTED, its worker, start and heartbeat; its key persisted. (Its worker heartbeat
    is left to the housekeeping's, every few seconds: ``housekeeping.py``.)"""
    job.prepare_for_execution(worker.name, pipeline=pipe)
    pipe.persist(job.key)


def finish(worker, job, queue, execution):
    """Record the success of ``job`` (rq's ``handle_job_success``) in one MULTI, with the writes the
    hooks hold (the caller counted this success into them: ``hooks.before_success_write``); then, only
    when the MULTI saw dependents, rq's own move of them. Raises what the pipeline raises; on a lost
    connection the hooks take their writes back (the caller retries: ``horse.record_for``)."""
    ttl = job.get_result_ttl(worker.default_result_ttl)
    pending = None
    try:
        with worker.connection.pipeline() as pipe:
            worker.increment_successful_job_count(pipeline=pipe)
            worker.increment_total_working_time(job.ended_at - job.started_at, pipe)
            job.set_status(JobStatus.FINISHED, pipeline=pipe)
            job.save(pipeline=pipe, include_meta=False, include_result=False)
            stream.record(
                job,
                Result.Type.SUCCESSFUL,
                ttl,
                pipe,
                attempt=jobmeta.current_attempt(job),
                return_value=rqcompat.cached_result(job),
                worker_name=worker.name,
                execution_id=execution.id,
                execution_started_at=execution.created_at,
                execution_ended_at=job.ended_at,
            )
            _add_finished(job, ttl, pipe)
            job.cleanup(ttl, pipeline=pipe, remove_from_queue=False)
            worker.cleanup_execution(job, pipeline=pipe, execution=execution)
            if limits.is_limited(job):
                limits.release_into(job, pipe)
            dependents_at = len(pipe)
            pipe.scard(job.dependents_key)
            pending = hooks.write_into(pipe)
            worker.set_state(WorkerStatus.IDLE, pipeline=pipe)
            replies = batch.execute(worker.connection, pipe, want=(dependents_at,))
    except REDIS_ERRORS:
        if pending is not None:
            hooks.restore(pending)
        raise
    if replies[dependents_at]:
        queue.enqueue_ready_jobs_by_queue(queue.move_dependents_to_ready(job))


def _add_finished(job, ttl, pipe):
    """rq's ``FinishedJobRegistry.add``, scored to the microsecond when the entry expires (rq scores whole
    seconds, which would leave the order of the jobs of one second to their ids: ``jobs/retention.py``)."""
    if ttl > 0:
        pipe.zadd(keys.finished_key(job.origin), {job.id: time.time() + ttl})
    else:
        job.finished_job_registry.add(job, ttl, pipe)
