"""The fork-free worker's own bookkeeping of one job: started in one Lua call, a success finished in one.

rq's SimpleWorker spends a dozen round trips on a job that does nothing: its ``prepare_execution``
pipeline, then ``prepare_job_execution``'s, an unpipelined heartbeat when the job returns,
``handle_job_success``'s WATCH, SMEMBERS and MULTI, and per loop a suspension check and a state
write. A worker that runs its jobs in its own process (``OptimaSimpleWorker``, and the concurrent
worker, which runs this same path in several threads) writes the same keys in fewer trips:

======================  ========================================================================
the pop                 one Lua call: the job id into the intermediate list, its hash read back
                        (``dequeue.py``); it writes the start too (``popstart.py``), for most jobs
the start               one Lua call (``attempt.begin`` with ``started_into``): the execution, the
                        started registry, the worker BUSY, the job STARTED (rq's
                        ``prepare_for_execution``), the id out of the intermediate list
a success               one MULTI (``finish``): status, the job's hash, rq's Result stream entry,
                        the finished registry (scored to the microsecond: no re-score later), the
                        expiries, the execution removed, the limit key's slot; once a second the
                        worker's counters and the hooks' writes (the metrics: ``Tally``); and after
                        its EXEC, in the same round trip, the fork-free worker's next pop
                        (``intake.Intake.pop_ahead``)
both                    sent without redis-py's per-reply work (``connection/batch.py``): the start as
                        one EVALSHA of the batch script (one reply to parse instead of ~20), a success
                        as one MULTI read back raw (the server's cheaper way for its ~40 arguments)
per loop                the suspension check at most once a second; no BUSY write when the worker
                        is busy already, the IDLE write only when a pop finds nothing (``intake.py``)
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

import threading
import time

from rq.job import JobStatus
from rq.results import Result
from rq.utils import utcformat
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.connection import batch
from queues.connection.outage import REDIS_ERRORS
from queues.events import hooks
from queues.jobs import execution as execution_record
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


def started_into(worker, job, pipe, execution):
    """Queue on ``pipe`` (the start's MULTI) what rq's ``prepare_job_execution`` writes in the job's
    process: the job STARTED, its worker, start and heartbeat, and the ``execution`` it runs under
    (``queues/jobs/execution.py``); its key persisted. (Its worker heartbeat is left to the housekeeping's,
    every few seconds: ``housekeeping.py``.)"""
    execution_record.started_into(job, worker.name, execution, pipe)
    pipe.persist(job.key)


def finish(worker, job, queue, execution):
    """Record the success of ``job`` (rq's ``handle_job_success``) in one MULTI, with the writes the
    hooks hold (the caller counted this success into them: ``hooks.before_success_write``); then, only
    when the MULTI saw dependents, rq's own move of them. Raises what the pipeline raises; on a lost
    connection the hooks take their writes back (the caller retries: ``horse.record_for``)."""
    ttl = job.get_result_ttl(worker.default_result_ttl)
    pending = counted = None
    tally = tally_of(worker)
    try:
        with worker.connection.pipeline() as pipe:
            counted = tally.take_into(pipe, worker.key, job.ended_at - job.started_at)
            rqcompat.set_status_in_hash(job, JobStatus.FINISHED)  # as rq's set_status, without an HSET of its own
            kept_at = _kept_into(job, ttl, pipe)  # before the HSET, which would make a deleted job's hash again
            pipe.hset(job.key, mapping=success_fields(job))
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
            dependents_at = _expire_into(job, ttl, pipe)
            worker.cleanup_execution(job, pipeline=pipe, execution=execution)
            if limits.is_limited(job):
                limits.release_into(job, pipe)
            if counted is not None:  # written with this success: the metrics the hooks hold too
                pending = hooks.write_into(pipe)
            if worker.idle_with_success and worker.get_state() != worker.resting_state():
                worker.set_state(WorkerStatus.IDLE, pipeline=pipe)  # only a change: BUSY again and again is a command
            ahead = worker.intake.pop_ahead()  # the next pop in the same round trip (fork-free worker)
            replies = batch.execute_multi(
                worker.connection, pipe, want=(kept_at, dependents_at), then=ahead[1] if ahead else None
            )
    except REDIS_ERRORS:
        if pending is not None:
            hooks.restore(pending)
        tally.give_back(counted, job.ended_at - job.started_at)
        raise
    if ahead and "then" in replies:
        worker.intake.dequeuer.sent(ahead[0], replies["then"])
    if not replies[kept_at]:
        _forget_deleted(worker, job)
        return
    if replies[dependents_at]:
        queue.enqueue_ready_jobs_by_queue(queue.move_dependents_to_ready(job))


class Tally:
    """What a success writes that need not land with each one (issue 36): rq's two counters of the worker
    (``successful_job_count``, ``total_working_time``: 2 commands a job) and the hooks' metrics (8: the counters,
    histograms and duration sample of ``queues/metrics/recorder.py``). A success adds to it and writes it out
    only when ``WRITE_EVERY_SECONDS`` passed since the last write; the housekeeping writes the rest when the worker
    goes idle (its pop finds no job) or with its heartbeat (``housekeeping.flush``). So a drain pays those 10
    commands once a second, not once a job; a figure lags a success by at most a second while jobs keep coming
    (the heartbeat's ``HEARTBEAT_EVERY`` behind a long job), and a worker killed by SIGKILL loses the last second's
    counts, as a work horse so killed always lost its own (``metrics/recorder.py``). Sidekiq batches its
    processed/failed counters the same way, on its heartbeat. Threads of the concurrent worker share one."""

    WRITE_EVERY_SECONDS = 1.0

    def __init__(self):
        self._lock = threading.Lock()
        self.successes = 0
        self.seconds = 0.0
        self.written_at = float("-inf")  # the first success writes at once

    def take_into(self, pipe, worker_key, working, write=None):
        """Count a success that worked ``working`` (a timedelta; None: count nothing, a flush) and, when a write is
        due (``write``: True forces one), queue on ``pipe`` the counters held so far, forgetting them here ->
        (successes, seconds) so written, or None when nothing was written."""
        with self._lock:
            if working is not None:
                self.successes += 1
                self.seconds += working.total_seconds()
            moment = time.monotonic()
            if not (write or (write is None and moment - self.written_at >= self.WRITE_EVERY_SECONDS)):
                return None
            taken = (self.successes, self.seconds)
            self.successes, self.seconds, self.written_at = 0, 0.0, moment
        if taken[0]:
            pipe.hincrby(worker_key, "successful_job_count", taken[0])
            pipe.hincrbyfloat(worker_key, "total_working_time", taken[1])
        return taken

    def give_back(self, taken, working=None):
        """A write that failed: ``taken`` (``take_into``'s) counted again, less the success ``working`` it was
        to record (its retry counts it again)."""
        with self._lock:
            if taken is not None:
                self.successes += taken[0]
                self.seconds += taken[1]
            if working is not None:
                self.successes -= 1
                self.seconds -= working.total_seconds()

    def pending(self):
        return bool(self.successes)


def tally_of(worker):
    """The worker's ``Tally`` (made with it: ``adapter.WorkerBehaviour``)."""
    return worker.success_tally


def success_fields(job):
    """The fields of ``job``'s hash that its success changes: its status, dates and worker. rq's
    ``handle_job_success`` saves the whole hash (``Job.save``), the same values again for the other fields, at the
    cost of ``to_dict``'s compression of ``data`` again and five dates formatted (18 µs a job) and an HSET of ~20
    fields instead of 5 (issue 36). ``started_at`` too: rq's perform sets it again in the job's process, after the
    start wrote it. The user's meta is not written, as rq's success leaves it (``include_meta=False``)."""
    return {
        "status": JobStatus.FINISHED.value,
        "started_at": utcformat(job.started_at) if job.started_at else "",
        "ended_at": utcformat(job.ended_at) if job.ended_at else "",
        "last_heartbeat": utcformat(job.last_heartbeat) if job.last_heartbeat else "",
        "worker_name": job.worker_name or "",
    }


def _kept_into(job, ttl, pipe):
    """The job's key expired as rq's ``Job.cleanup`` of a kept success does (``eligible``: ttl is not 0; for ever:
    left as it is), queued before the success's HSET: -> the index in ``pipe`` of a reply that is false when the key
    was gone, the job deleted (the panel, ``queues.operator``) while it ran. The HSET of the success's fields would
    otherwise make its hash again, five fields of it (``_forget_deleted``). The EXPIRE rq's cleanup sends anyway
    answers it: no command more a job."""
    if ttl is not None and ttl > 0:
        pipe.expire(job.key, ttl)
    else:
        pipe.exists(job.key)
    return len(pipe) - 1


def _forget_deleted(worker, job):
    """The success of a job deleted while it ran is not kept: the hash its HSET made, its Result and its entry in
    the finished registry go, as the delete took the rest (rq would have saved the whole job again)."""
    worker.log.info("Job %s was deleted while it ran: its success is not kept", job.id)
    try:
        with worker.connection.pipeline(transaction=False) as pipe:
            pipe.delete(job.key, Result.get_key(job.id))
            pipe.zrem(keys.finished_key(job.origin), job.id)
            pipe.execute()
    except REDIS_ERRORS as exc:  # left as rq left such a job: its registry entry and hash expire with its ttl
        worker.log.warning("Could not remove the success of deleted job %s: %s", job.id, exc)


def _expire_into(job, ttl, pipe):
    """The rest of rq's ``Job.cleanup`` of a kept success (the job's key is ``_kept_into``'s), which also says
    whether the job has dependents to move: -> the index in ``pipe`` of a reply that is true when it has. rq expires
    the job's key and its dependents' and dependencies' sets, then the success asked SCARD of the dependents: here
    the EXPIRE of the dependents' set is that question (1 when the set exists, and an empty set does not), and the
    dependencies' set is expired only when the job names dependencies. Two commands a job fewer (issue 36)."""
    if ttl is not None and ttl > 0:
        if rqcompat.names_dependencies(job):
            pipe.expire(job.dependencies_key, ttl)
        pipe.expire(job.dependents_key, ttl)
    else:  # kept for ever (a negative ttl; rq's cleanup leaves the keys as they are)
        pipe.exists(job.dependents_key)
    return len(pipe) - 1


def _add_finished(job, ttl, pipe):
    """rq's ``FinishedJobRegistry.add``, scored to the microsecond when the entry expires (rq scores whole
    seconds, which would leave the order of the jobs of one second to their ids: ``jobs/retention.py``)."""
    if ttl > 0:
        pipe.zadd(keys.finished_key(job.origin), {job.id: time.time() + ttl})
    else:
        job.finished_job_registry.add(job, ttl, pipe)
