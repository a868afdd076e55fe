"""Inside the work horse: recording a job's start and outcome through a Redis outage.

rq 3.0's horse lets a Redis error while recording a success fall into its failure path (a job that
succeeded during an outage was recorded as failed), and dies on a SIGTERM sent to every process of
the service. Here the horse retries recording the start, the success or the failure for up to
``OUTCOME_WAIT_SECONDS``; past that it exits with EX_TEMPFAIL without recording anything, and its
worker puts the job back (``supervision.py``). It ignores SIGTERM (its worker decides when the job
stops) and dies with its worker.
"""
import os
import signal

from rq.job import JobStatus
from rq.utils import now

from .liveness import die_with_parent
from .outage import REDIS_ERRORS, Backoff, OutageLog, retry_while_unavailable

EX_TEMPFAIL = getattr(os, "EX_TEMPFAIL", 75)  # the horse could not record its job's outcome


def _ignore_signal(signum, frame):
    """SIGTERM in the work horse: the worker decides when the job stops (a handler, not SIG_IGN, so
    that programs the job starts get the default disposition back)."""


class WorkHorseMixin:
    def setup_work_horse_signals(self):
        super().setup_work_horse_signals()
        signal.signal(signal.SIGTERM, _ignore_signal)
        die_with_parent(self.pid)

    def _in_horse(self, func, doing):
        """``func()`` in the work horse, retried through a Redis outage for OUTCOME_WAIT_SECONDS;
        after that the horse exits with EX_TEMPFAIL and its worker puts the job back."""
        outage = OutageLog(self.log, f"Work horse of worker {self.name}")
        backoff = Backoff(self.resilience.redis_retry_max)
        try:
            return retry_while_unavailable(func, backoff, outage, doing=doing,
                                           give_up_after=self.resilience.outcome_wait)
        except REDIS_ERRORS:
            self.log.error("Work horse of worker %s: could not %s for %g s; the job goes back to its "
                           "queue and may run again", self.name, doing, self.resilience.outcome_wait)
            os._exit(EX_TEMPFAIL)

    def prepare_job_execution(self, job, remove_from_intermediate_queue=False):
        parent = super()
        if not self.is_horse:
            return parent.prepare_job_execution(job, remove_from_intermediate_queue)
        return self._in_horse(lambda: parent.prepare_job_execution(job, remove_from_intermediate_queue),
                              f"mark job {job.id} started")

    def handle_job_failure(self, job, queue, started_job_registry=None, exc_string="", execution=None):
        if self.is_horse:
            # Record the failure once Redis answers (the retry policy needs it), not half of it now.
            self._in_horse(self.connection.ping, f"record the failure of job {job.id}")
        return super().handle_job_failure(job, queue, started_job_registry=started_job_registry,
                                          exc_string=exc_string, execution=execution)

    def handle_execution_ended(self, job, queue, heartbeat_ttl):
        try:
            super().handle_execution_ended(job, queue, heartbeat_ttl)
        except REDIS_ERRORS:
            job.ended_at = job.ended_at or now()  # only a heartbeat was lost

    def handle_job_success(self, job, queue, started_job_registry, execution):
        parent = super()
        if not self.is_horse:
            return parent.handle_job_success(job, queue, started_job_registry, execution)

        def record():
            try:
                return parent.handle_job_success(job, queue, started_job_registry, execution)
            except REDIS_ERRORS:
                if job.connection.hget(job.key, "status") == JobStatus.FINISHED.value.encode():
                    return None  # the success is recorded; only what follows it failed
                raise

        return self._in_horse(record, f"record the success of job {job.id}")
