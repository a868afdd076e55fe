"""One job in the worker's main process, from the dequeue to an outcome that is never lost.

- ``prepare_execution``: the job leaves ``<p>:queue:<q>:intermediate`` in the same MULTI that
  registers it as started; a stop request, or Redis going away at that moment, gives it back to
  the head of its queue instead (``NotStarted``).
- ``monitor_work_horse``: waits for the horse (pidfd, no SIGALRM races), heartbeats through outages,
  and ends the shutdown grace period by killing the horse.
- ``_settle``: after the horse, makes sure the job ended somewhere — finished, failed, retried, dead,
  or back at the head of its queue with its attempt not counted (``return_to_queue``) when the horse
  was stopped on purpose or left no outcome (Redis away, EX_TEMPFAIL, killed before starting it).
"""
import os
import select
import time

from rq.exceptions import InvalidJobOperation
from rq.executions import Execution
from rq.job import JobStatus
from rq.registry import StartedJobRegistry
from rq.utils import now
from rq.worker.base import WorkerStatus

from .abandoned import give_back, intermediate_key
from .horse import EX_TEMPFAIL
from .outage import REDIS_ERRORS


class NotStarted(Exception):
    """A dequeued job went back to its queue instead of starting (stop request, outage)."""


class _Reaper:
    """Wait for the work horse to exit, at most ``timeout`` seconds at a time (pidfd: no signals)."""

    def __init__(self, pid):
        self.pid = pid
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, timeout):
        if self.fd is not None:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            return self._reap(blocking=True) if ready else None
        deadline = time.monotonic() + timeout
        while True:
            result = self._reap(blocking=False)
            if result is not None or time.monotonic() >= deadline:
                return result
            time.sleep(0.01)

    def _reap(self, blocking):
        try:
            pid, status, rusage = os.wait4(self.pid, 0 if blocking else os.WNOHANG)
        except ChildProcessError:
            return self.pid, None, None  # reaped elsewhere: outcome unknown, settled from Redis
        return (pid, status, rusage) if pid else None

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class JobSupervisionMixin:
    # -- one job ----------------------------------------------------------------------------
    def execute_job(self, job, queue):
        try:
            return super().execute_job(job, queue)
        except NotStarted:
            self.set_state(WorkerStatus.IDLE)

    def prepare_execution(self, job):
        """rq's prepare_execution, plus: the job leaves the intermediate list in the same MULTI."""
        queue_key = self.queue_class.redis_queue_namespace_prefix + job.origin
        if self._stop_requested:
            self._give_back(job, queue_key, "the worker is stopping")
            raise NotStarted()
        execution = None
        try:
            with self.connection.pipeline() as pipe:
                execution = Execution.create(job, self.get_heartbeat_ttl(job), pipeline=pipe, worker_name=self.name)
                self.set_state(WorkerStatus.BUSY, pipeline=pipe)
                pipe.lrem(intermediate_key(queue_key), 1, job.id)
                pipe.execute()
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, f"start job {job.id}")
            if not self._await_redis(give_up_when_stopping=True):
                raise NotStarted() from None  # still in the intermediate list: the abandoned-job scan returns it
            wip = StartedJobRegistry(job.origin, connection=self.connection).key
            if execution is None or self.connection.zscore(wip, execution.composite_key) is None:
                self._give_back(job, queue_key, "Redis was unreachable when it was to start")
                raise NotStarted() from None
        self.executions[execution.id] = execution
        return execution

    def _give_back(self, job, queue_key, why):
        try:
            if give_back(self.connection, queue_key, job.id):
                self.log.info("Worker %s: job %s back at the head of its queue, not started: %s", self.name, job.id, why)
        except REDIS_ERRORS:
            pass  # left in the intermediate list: the abandoned-job scan returns it

    def monitor_work_horse(self, job, queue, execution):
        """Wait for the work horse (rq's loop, with the grace period and outage-proof heartbeats)."""
        job.started_at = now()
        reaper = _Reaper(self._horse_pid)
        next_beat = time.monotonic() + self.job_monitoring_interval
        overran = False
        try:
            while True:
                result = reaper.wait(1.0)
                if result is not None:
                    break
                moment = time.monotonic()
                if self._stop_requested and self._grace_deadline is None:  # asked while the job was starting
                    self._grace_deadline = moment + self.shutdown_grace
                if self._interrupted is None and self._grace_deadline is not None and moment >= self._grace_deadline:
                    self._interrupted = f"the shutdown grace period of {self.shutdown_grace:g} s ran out"
                    self.log.warning("Worker %s: stopping job %s: %s", self.name, job.id, self._interrupted)
                    self.kill_horse()
                    continue
                if not overran and job.timeout and job.timeout > 0:
                    if (now() - job.started_at).total_seconds() > job.timeout + 60:
                        overran = True  # the horse's own timeout did not fire: rq's safety net
                        self.log.warning("Worker %s: job %s overran its timeout by 60 s; killing its horse",
                                         self.name, job.id)
                        self.kill_horse()
                        continue
                if moment >= next_beat:
                    next_beat = moment + self.job_monitoring_interval
                    self.maintain_heartbeats(job, execution)
                self._tick()
        finally:
            reaper.close()
        retpid, ret_val, rusage = result
        self._horse_pid = 0
        self.executions.pop(execution.id, None)
        self._settle(job, queue, execution, retpid, ret_val, rusage)

    def _settle(self, job, queue, execution, retpid, ret_val, rusage):
        """Make sure the horse's job ended somewhere: finished, failed, retried, dead or queued.

        Waits for Redis as long as it takes — unless the worker is stopping: then for the grace
        period once more (5 s after a second signal), after which the job is left registered as
        started, for the other workers to re-run or dead-letter once this one is gone."""
        interrupted, self._interrupted = self._interrupted, None
        give_up_at = None
        while True:
            if give_up_at is None and (self._cold or self._stop_requested):
                give_up_at = time.monotonic() + (5 if self._cold else max(5.0, self.shutdown_grace))
            if give_up_at is not None and time.monotonic() >= give_up_at:
                self.log.error(
                    "Worker %s: Redis unreachable; job %s stays registered as started and the other workers "
                    "will re-run or dead-letter it once this one is gone", self.name, job.id)
                return
            if not self._await_redis(deadline=time.monotonic() + 5):
                continue
            try:
                return self._settle_once(job, queue, execution, interrupted, retpid, ret_val, rusage)
            except REDIS_ERRORS as exc:
                self._outage.failed(exc, f"settle job {job.id}")

    def _settle_once(self, job, queue, execution, interrupted, retpid, ret_val, rusage):
        wip = StartedJobRegistry(queue.name, connection=self.connection).key
        try:
            status = job.get_status(refresh=True)
        except InvalidJobOperation:
            return self._forget(job, execution)  # the job was deleted meanwhile
        registered = self.connection.zscore(wip, execution.composite_key) is not None
        exit_code = os.WEXITSTATUS(ret_val) if ret_val is not None and os.WIFEXITED(ret_val) else None

        if registered and status == JobStatus.QUEUED:  # the horse ended before marking it started
            return self.return_to_queue(job, queue, execution, interrupted or "its work horse ended before starting it")
        if interrupted:
            if status == JobStatus.STARTED:
                return self.return_to_queue(job, queue, execution, interrupted)
        elif ret_val is None or exit_code in (0, EX_TEMPFAIL):
            if registered and status == JobStatus.STARTED:
                why = ("its work horse could not reach Redis to record the outcome" if exit_code == EX_TEMPFAIL
                       else "its outcome was not recorded")
                return self.return_to_queue(job, queue, execution, why)
        elif self._stopped_job_id == job.id:
            return self._handle_stopped_job(job, queue, execution)
        elif status == JobStatus.STARTED:
            job.ended_at = now()
            how = f" (signal {os.WTERMSIG(ret_val)})" if os.WIFSIGNALED(ret_val) else ""
            exc_string = f"Work-horse terminated unexpectedly; waitpid returned {ret_val}{how}; "
            self.log.warning("Worker %s: job %s failed (%s)", self.name, job.id, exc_string)
            self.handle_work_horse_killed(job, retpid, ret_val, rusage)
            self.handle_job_failure(job, queue=queue, exc_string=exc_string, execution=execution)
            registered = self.connection.zscore(wip, execution.composite_key) is not None
            if registered and job.get_status(refresh=True) == JobStatus.STARTED:
                return self.return_to_queue(job, queue, execution, "its failure could not be recorded")
        if registered:
            self._forget(job, execution)

    def return_to_queue(self, job, queue, execution, why):
        """Put a job that did not end back at the head of its queue. Its attempt is not counted
        (``job.meta["interruptions"]`` counts these returns)."""
        job.get_meta(refresh=True)
        job.meta["interruptions"] = int(job.meta.get("interruptions", 0) or 0) + 1
        job.meta["last_interruption"] = why
        with self.connection.pipeline() as pipe:
            execution.delete(job=job, pipeline=pipe)
            job.set_status(JobStatus.QUEUED, pipeline=pipe)
            pipe.hset(job.key, "meta", job.serializer.dumps(job.meta))
            if self.connection.lpos(queue.key, job.id) is None:
                pipe.lpush(queue.key, job.id)
            pipe.execute()
        self.log.warning("Worker %s: job %s back at the head of %s, attempt not counted: %s",
                         self.name, job.id, queue.name, why)

    def _forget(self, job, execution):
        with self.connection.pipeline() as pipe:
            execution.delete(job=job, pipeline=pipe)
            pipe.execute()
