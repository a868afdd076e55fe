"""What a worker does when an attempt fails: the retry policy applied, and the dead letter.

rq's ``handle_job_failure`` retries with its own ``Retry`` (a fixed list of whole-second
intervals set at enqueue, no RetryAfter, no non-retryable errors) or fails the job. This
project's policy is ``queues.failures.retry``; this module applies it for a worker:

1. ``judge``: which attempt failed, with what, and the ``Decision`` (retry after a delay, or dead
   with a reason); sends ``job_failed``.
2. ``retry``: one MULTI cleans up the execution, keeps the attempt's traceback in the job's results
   stream (rq's RETRIED result), counts the failure for the worker, and schedules the next attempt
   (``retry.queue_retry``); then ``job_retry_scheduled``.
3. dead: ``before_burial`` records the death in the meta; the worker then lets rq fail the job
   (FAILED status, FailedJobRegistry, the failure result); ``after_burial`` pins it at +inf in the
   failed registry, mirrors it into the ``DeadLetter`` table and sends ``job_dead``.

``handle`` runs the three for the worker's ``handle_job_failure``. The worker keeps the exception
object rq hands to ``handle_exception`` (rq passes only its text to ``handle_job_failure``):
``remember`` / ``take``.
"""

import datetime as dt
import logging

from rq.job import JobStatus
from rq.results import Result

from queues import rqcompat
from queues.events import hooks
from queues.exceptions import RetryAfter
from queues.failures import deadletter, retry
from queues.jobs import meta as jobmeta
from queues.jobs import resume, stream

logger = logging.getLogger("queues.worker")


def duration(job):
    """Seconds the attempt ran (0 when rq has no start or end time)."""
    if job.started_at and job.ended_at:
        return max(0.0, (job.ended_at - job.started_at).total_seconds())
    return 0.0


class FailureHandler:
    def __init__(self, worker, record_for):
        self.worker = worker
        self.record_for = record_for  # the worker's way through an outage (worker/horse.py: record_for)
        self._held = None  # (job id, exc_info) of the latest handle_exception

    def remember(self, job, exc_info):
        self._held = (job.id, exc_info)

    def take(self, job):
        held, self._held = self._held, None
        return held[1] if held and held[0] == job.id else None

    def handle(self, job, queue, *, exc_string, execution, bury):
        """A failed attempt: the next one scheduled, or the job dead (``bury()`` is rq's own failure
        bookkeeping, between ``before_burial`` and ``after_burial``). A retry that cannot be
        scheduled puts the job back (``worker.outcome_lost``): it must not be lost."""
        worker = self.worker
        if worker.is_horse or worker.runs_jobs_in_process:
            # Record the failure once Redis answers (the retry policy needs it), not half of it now.
            self.record_for(worker, worker.connection.ping, f"record the failure of job {job.id}")
        exc_info = self.take(job)
        if not self.still_there(job):
            self.forget_deleted(job, execution)
            return
        if exc_info and resume.is_pause(exc_info[1]):  # issue 34: a long job stopped at its checkpoint
            self.pause(job, exc_info[1], execution)
            return
        decision = self.judge(job, exc_info, stopped=rqcompat.stopped_job_id(worker) == job.id)
        if decision.retry:
            try:
                self.retry(job, queue, decision.delay, exc_info, exc_string, execution)
            except Exception:  # noqa: BLE001 — the job must not be lost: it goes back instead
                worker.log.exception("Worker %s: failed to schedule the retry of job %s", worker.name, job.id)
                worker.outcome_lost(job, queue, execution, "its retry could not be scheduled")
            return
        self.before_burial(job, decision.reason, exc_info, exc_string)
        bury()
        self.after_burial(job, decision.reason, exc_string, exc_info=exc_info)

    def still_there(self, job):
        """Whether the job's hash is still in Redis, read with its meta (the job may have written its own while it
        ran: ``judge`` decides on it) in one round trip. A job deleted while it ran (the panel's delete does not
        stop it) has none: its failure would save the whole job again, and a retry would run it again from its
        first attempt (the meta gone). What tells is the ``data`` field, not the key: rq's end of the attempt
        (``handle_execution_ended``) has written the job's ``last_heartbeat`` by now, which makes a hash of that
        one field where there was none. On a Redis error: True, the meta as it was (the failure is recorded as
        before)."""
        try:
            with self.worker.connection.pipeline(transaction=False) as pipe:
                pipe.hexists(job.key, "data")
                pipe.hget(job.key, "meta")
                exists, meta = pipe.execute()
        except Exception:  # noqa: BLE001 — Redis trouble; decide on what we have
            logger.warning("Could not refresh meta of job %s before handling its failure", job.id)
            return True
        if not exists:
            return False
        job.meta = job.serializer.loads(meta) if meta else {}  # rq's get_meta(refresh=True)
        return True

    def forget_deleted(self, job, execution):
        """The failed attempt of a job deleted while it ran: its execution ends, the hash of its ``last_heartbeat``
        alone goes (``still_there``), and its limit key's slot goes to the next held job; no failure, retry or dead
        letter is written, no failure counted."""
        worker = self.worker
        worker.log.warning(
            "Worker %s: job %s was deleted while it ran: its failure is not recorded, nor retried", worker.name, job.id
        )

        def end():
            with worker.connection.pipeline() as pipe:
                worker.cleanup_execution(job, pipeline=pipe, execution=execution)
                pipe.delete(job.key)
                pipe.execute()

        self.record_for(worker, end, f"end the execution of deleted job {job.id}")
        rqcompat.release_slot(worker, job)

    def pause(self, job, pause, execution):
        """A long job stopped at a checkpoint (``queues/jobs/resume.py``): not a failure. Paused, it goes
        back to its queue with its cursor and no attempt spent; canceled, it ends canceled (its limit key's
        slot given to the next held job)."""
        worker = self.worker

        def cleanup(pipe):
            worker.cleanup_execution(job, pipeline=pipe, execution=execution)

        if pause.canceled:
            end = resume.idempotent(
                worker.connection, job, JobStatus.CANCELED, lambda: resume.end_canceled(worker.connection, job, cleanup)
            )
            self.record_for(worker, end, f"record the cancel of job {job.id}")
            rqcompat.release_slot(worker, job)
            worker.log.warning("Worker %s: job %s stopped at its checkpoint: %s", worker.name, job.id, pause.why)
            return
        back = resume.idempotent(
            worker.connection, job, JobStatus.QUEUED, lambda: resume.put_back(worker.connection, job, pause, cleanup)
        )
        self.record_for(worker, back, f"pause job {job.id}")
        worker.log.info(
            "Worker %s: job %s paused at its checkpoint (%s); back to its queue, attempt not counted",
            worker.name,
            job.id,
            pause.why,
        )

    def judge(self, job, exc_info, *, stopped):
        """The Decision for a failed attempt (the hooks' ``after_failure``: ``job_failed``), on the job's meta as
        ``still_there`` read it again."""
        if stopped:
            decision = retry.Decision(False, reason=retry.STOPPED)
        else:
            decision = retry.decide(
                jobmeta.current_attempt(job), retry.policy_for(job), exc_info[1] if exc_info else None
            )
        hooks.after_failure(job, jobmeta.queue_name(job), exc_info, duration(job), decision.retry)
        return decision

    def retry(self, job, queue, delay, exc_info, exc_string, execution):
        """Schedule the next attempt. False when the writes failed (the caller decides what then)."""
        worker = self.worker
        attempt = jobmeta.current_attempt(job)
        failed_at = job.ended_at or dt.datetime.now(dt.UTC)
        if failed_at.tzinfo is None:
            failed_at = failed_at.replace(tzinfo=dt.UTC)
        reason = "retry_after" if exc_info and isinstance(exc_info[1], RetryAfter) else "backoff"
        with worker.connection.pipeline() as pipeline:
            worker.cleanup_execution(job, pipeline=pipeline, execution=execution)
            # The failed attempt's traceback, kept in the job's results stream (rq's RETRIED type).
            stream.record(
                job,
                Result.Type.RETRIED,
                job.failure_ttl,
                pipeline,
                attempt=attempt,
                exc_string=exc_string,
                worker_name=worker.name,
                execution_id=execution.id if execution else None,
                execution_started_at=execution.created_at if execution else None,
                execution_ended_at=job.ended_at,
            )
            worker.increment_failed_job_count(pipeline)
            if job.started_at and job.ended_at:
                worker.increment_total_working_time(job.ended_at - job.started_at, pipeline)
            released = retry.queue_retry(job, queue, delay, pipeline, failed_at=failed_at, reason=reason)
            pipeline.execute()
        if not released:  # a job with a limit key gave its slot back in the MULTI above
            rqcompat.release_slot(worker, job)
        hooks.after_retry(  # the job's outcome line, job_retry_scheduled
            job,
            jobmeta.queue_name(job),
            attempt=attempt,
            delay=float(delay),
            reason=reason,
            duration=duration(job),
            exc_info=exc_info,
            exc_string=exc_string,
        )
        return True

    def before_burial(self, job, reason, exc_info, exc_string):
        exc_type, exc_message = retry.exc_summary(exc_info, exc_string)
        deadletter.mark_dead(job, reason, exc_type=exc_type, exc_message=exc_message, worker_name=self.worker.name)
        try:
            job.save_meta()
        except Exception:  # noqa: BLE001
            logger.exception("Worker %s: could not save the dead-letter meta of job %s", self.worker.name, job.id)
        job.retries_left = None  # never rq's own retry: the policy decided

    def after_burial(self, job, reason, exc_string, exc_info=None):
        try:
            deadletter.keep_forever(job)
        except Exception:  # noqa: BLE001 — rq's -1 score keeps it too; this only makes it read as "never"
            logger.warning("Worker %s: could not pin dead job %s at +inf", self.worker.name, job.id)
        deadletter.mirror(job, exc_string=exc_string)
        hooks.after_dead(  # the job's outcome line (canceled for STOPPED), job_dead
            job,
            jobmeta.queue_name(job),
            reason=reason,
            duration=duration(job),
            exc_info=exc_info,
            exc_string=exc_string,
        )
