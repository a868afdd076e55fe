"""``ResilienceMixin``: the part of OptimaWorker that keeps jobs from being lost.

What rq 3.0 does on its own, and what this changes (docs/operations.md tells the operator's side):

At-least-once
    A worker proves it lives with a key that expires 10 s after its last beat (``liveness.py``); a
    scan run by the live workers re-runs or dead-letters the jobs of dead ones within seconds
    (``abandoned.py``) — rq acts on them only when a 90 s started-entry TTL has run out *and*
    something cleans the registry (every 10 minutes). Several queues are dequeued with an atomic
    LMOVE instead of BLPOP (``dequeue.py``); the job leaves the intermediate list in the same MULTI
    that records it as started (``prepare_execution``). The work horse and RQ's scheduler die with
    their worker (``die_with_parent``), and a dead worker's scheduler lock lapses in 10 s, not 61 s.

Shutdown
    SIGTERM or SIGINT: no new job; the running one may finish within ``SHUTDOWN_GRACE_SECONDS``
    (``--grace``); after that, or at a second signal, the work horse is killed and the job goes
    back to the head of its queue — the attempt is not counted, nothing is recorded as finished or
    failed — and the worker exits 0. The horse ignores SIGTERM, so a supervisor that signals the
    whole process group or cgroup does not kill the job early.

Redis outages
    Nothing that talks to Redis may end the worker or fail a job: heartbeats, state, maintenance,
    dequeue and the settling of a finished horse wait for Redis with a backoff capped at
    ``REDIS_RETRY_MAX_SECONDS``. The horse retries recording its job's start and success for up to
    ``OUTCOME_WAIT_SECONDS``; past that it exits with EX_TEMPFAIL and the job goes back to its queue
    (it may run again; it is never dead-lettered for the outage). Any horse exit that left its job
    "started" without an outcome is treated the same way.
"""
import os
import select
import signal
import time
from datetime import timedelta

from rq import worker_registration
from rq.exceptions import InvalidJobOperation, StopRequested
from rq.executions import Execution
from rq.job import JobStatus
from rq.registry import StartedJobRegistry
from rq.utils import now
from rq.worker.base import WorkerStatus, signal_name

from .abandoned import LIVENESS_MARK, give_back, intermediate_key
from .config import options
from .dequeue import ReliableDequeue
from .liveness import Lifeline, die_with_parent
from .outage import REDIS_ERRORS, Backoff, OutageLog, wait_until_reachable
from .schedulers import ResilientRQScheduler

EX_TEMPFAIL = getattr(os, "EX_TEMPFAIL", 75)  # the horse could not record its job's outcome


class NotStarted(Exception):
    """A dequeued job went back to its queue instead of starting (stop request, outage)."""


def reliable_queue_class(base, worker):
    """``base`` (the worker's queue class) with ``ReliableDequeue``'s dequeue, bound to ``worker``."""
    return type(f"Reliable{base.__name__}", (ReliableDequeue, base), {"worker": worker, "__module__": __name__})


def _ignore_signal(signum, frame):
    """SIGTERM in the work horse: the worker decides when the job stops (a handler, not SIG_IGN, so
    that programs the job starts get the default disposition back)."""


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


class ResilienceMixin:
    def __init__(self, *args, shutdown_grace=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.resilience = options()
        self.shutdown_grace = self.resilience.shutdown_grace if shutdown_grace is None else float(shutdown_grace)
        self.max_connection_wait_time = self.resilience.redis_retry_max  # rq's dequeue-loop reconnect cap
        if kwargs.get("prepare_for_work", True):
            self.queue_class = reliable_queue_class(self.queue_class, self)
        self.lifeline = None
        self._grace_deadline = None
        self._interrupted = None  # why the worker killed the current horse on purpose
        self._cold = False  # a second stop signal arrived
        self._burst = False
        self._dequeuing = False
        self._holding = False  # a dequeued job is in hand, not yet started
        self._next_tick = 0.0
        self._registered_after = 0
        self._next_registration_check = 0.0
        self._outage = OutageLog(self.log, f"Worker {self.name}")
        self._backoff = Backoff(self.resilience.redis_retry_max)

    # -- timeouts ---------------------------------------------------------------------------
    @property
    def dequeue_timeout(self):
        """Seconds one blocking dequeue waits (rq: worker_ttl - 15 = 405 s)."""
        return (getattr(self, "resilience", None) or options()).dequeue_wait

    @property
    def connection_timeout(self):
        """Socket timeout of the worker's Redis client: a hung server is noticed in seconds."""
        return self.dequeue_timeout + 10

    def get_heartbeat_ttl(self, job, working_time=0.0):
        """Started entries outlive their last heartbeat by STARTED_ENTRY_TTL_SECONDS: dead workers
        are found by liveness (abandoned.py), and rq's own clean-up must not get there first."""
        return int(super().get_heartbeat_ttl(job, working_time)) + self.resilience.started_entry_ttl

    # -- start and stop ---------------------------------------------------------------------
    def bootstrap(self, *args, **kwargs):
        self._install_signal_handlers()  # rq installs them only after starting its scheduler
        self.lifeline = Lifeline(self.name, self.connection, self.resilience, self._scan_queue_names, self.log)
        self.lifeline.beat()  # raises while Redis is away: rqworker retries the start
        super().bootstrap(*args, **kwargs)
        self.connection.hset(self.key, LIVENESS_MARK, int(self.resilience.liveness_ttl))
        self.lifeline.start()

    def _scan_queue_names(self):
        from ..registry import queue_names

        return sorted(set(queue_names()) | set(self.queue_names()))

    def teardown(self):
        if self.is_horse:
            return super().teardown()
        if self.lifeline is not None:
            self.lifeline.stop()
        try:
            super().teardown()
        except REDIS_ERRORS as exc:
            self.log.warning("Worker %s: could not unregister (%s); its registration expires by itself",
                             self.name, type(exc).__name__)

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None):
        """rq's _start_scheduler with ResilientRQScheduler (short lock, outage-proof loop)."""
        from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT

        self._burst = burst
        self.scheduler = ResilientRQScheduler(
            self.queues, connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format or DEFAULT_LOGGING_DATE_FORMAT, log_format=log_format or DEFAULT_LOGGING_FORMAT,
            serializer=self.serializer, lock_seconds=self.resilience.scheduler_lock,
            retry_max=self.resilience.redis_retry_max,
        )
        self.scheduler.acquire_locks()
        if self.scheduler.acquired_locks:
            if burst:
                try:
                    self.scheduler.register_birth()
                    self.scheduler.enqueue_scheduled_jobs()
                finally:
                    self.scheduler.release_locks()
                    self.scheduler.register_death()
            else:
                self.scheduler.start()

    def stop_scheduler(self):
        process = self.scheduler._process if self.scheduler is not None else None
        if process is None or not process.pid:
            return
        try:
            os.kill(process.pid, signal.SIGTERM)
        except OSError:
            pass
        process.join(10)
        if process.is_alive():
            process.kill()
            process.join(2)

    def _install_signal_handlers(self):
        if not self._stop_requested:  # rq calls this again after bootstrap: keep a stop already asked for
            super()._install_signal_handlers()

    def request_stop(self, signum, frame):
        """First SIGTERM/SIGINT: take no new job; let the running one finish within the grace period.

        Never raises (rq raises StopRequested when idle, which can strand a job popped by an
        interrupted BLMOVE): the dequeue checks the request before each pop, every few seconds.
        """
        self._shutdown_requested_date = now()
        signal.signal(signal.SIGINT, self.request_force_stop)
        signal.signal(signal.SIGTERM, self.request_force_stop)
        self._stop_requested = True
        if self.horse_pid:
            self._grace_deadline = time.monotonic() + self.shutdown_grace
            self.log.warning(
                "Worker %s: %s: taking no new job; the running one may finish within %g s, then it goes back "
                "to its queue (a second signal does that now)", self.name, signal_name(signum), self.shutdown_grace,
            )
            try:
                self.set_shutdown_requested_date()
            except REDIS_ERRORS:
                pass
        else:
            self.log.warning("Worker %s: %s: stopping", self.name, signal_name(signum))
        if self.scheduler is not None:
            self.stop_scheduler()

    def request_force_stop(self, signum, frame):
        """Second signal: the running job goes back to its queue now; then the worker exits 0."""
        if self._shutdown_requested_date and now() - self._shutdown_requested_date < timedelta(seconds=1):
            return  # the same stop, delivered twice (e.g. by a pool and by the terminal)
        if self.horse_pid:
            self.log.warning("Worker %s: %s again: stopping the running job now; it goes back to its queue",
                             self.name, signal_name(signum))
            self._interrupted = "its worker received a second stop signal"
            self._cold = True
            self.kill_horse()
            return
        self.log.warning("Worker %s: %s again: exiting now", self.name, signal_name(signum))
        raise SystemExit(0)

    # -- the main loop's Redis calls, outage-proof ------------------------------------------
    def heartbeat(self, timeout=None, pipeline=None):
        if timeout:
            timeout = min(timeout, self.worker_ttl + 60)  # the started-entry TTL is long on purpose; this is not
        if pipeline is not None:
            return super().heartbeat(timeout, pipeline)
        try:
            super().heartbeat(timeout)
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, "heartbeat")
        else:
            if not self.is_horse:
                self._check_registration()
        if not self.is_horse:
            self._tick()
            if self._dequeuing and self._stop_requested and not self._holding:
                raise StopRequested()  # e.g. idle in pause's all-queues-paused wait

    def _check_registration(self):
        """After an outage (and every 30 s): a Redis restarted without its data has forgotten this
        worker; register it again so that panels and metrics still count it."""
        moment = time.monotonic()
        if self._outage.episodes == self._registered_after and moment < self._next_registration_check:
            return
        self._registered_after = self._outage.episodes
        self._next_registration_check = moment + 30
        try:
            if self.connection.hexists(self.key, "birth") or self.birth_date is None:
                return
            with self.connection.pipeline() as pipe:
                pipe.hset(self.key, mapping=self.serialize())
                pipe.hset(self.key, mapping={"state": self._state, LIVENESS_MARK: int(self.resilience.liveness_ttl)})
                worker_registration.register(self, pipe)
                pipe.expire(self.key, self.worker_ttl + 60)
                pipe.execute()
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, "register again")
            return
        self.log.warning("Worker %s: Redis had lost this worker's registration; registered again", self.name)

    def set_state(self, state, pipeline=None):
        if pipeline is not None:
            return super().set_state(state, pipeline)
        try:
            super().set_state(state)
        except REDIS_ERRORS as exc:
            self._state = state
            self._outage.failed(exc, "record its state")

    def check_for_suspension(self, burst):
        try:
            return super().check_for_suspension(burst)
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, "check for suspension")

    def run_maintenance_tasks(self):
        try:
            super().run_maintenance_tasks()
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, "run maintenance")
            self.last_cleaned_at = now()
        except Exception:  # noqa: BLE001 — maintenance (e.g. a database being down) never ends the worker
            self.log.exception("Worker %s: maintenance failed; next try in %s s", self.name, self.maintenance_interval)
            self.last_cleaned_at = now()

    def maintain_heartbeats(self, job, execution):
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, f"heartbeat job {job.id}")

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        self._dequeuing, self._holding = True, False
        try:
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        finally:
            self._dequeuing = False

    def _tick(self):
        """Every couple of seconds: make sure some scheduler holds the locks of this worker's queues."""
        moment = time.monotonic()
        if moment < self._next_tick or self.scheduler is None or self._stop_requested or self._burst:
            return
        self._next_tick = moment + max(1.0, self.resilience.scheduler_lock / 4)
        process = self.scheduler._process
        if process is not None and process.is_alive():
            return
        try:
            self.scheduler.acquire_locks(auto_start=True)  # starts a scheduler process if a lock was free
        except REDIS_ERRORS as exc:
            self._outage.failed(exc, "check the scheduler lock")

    def _await_redis(self, deadline=None, give_up_when_stopping=False):
        should_stop = (lambda: self._stop_requested) if give_up_when_stopping else None
        return wait_until_reachable(self.connection, self._backoff, self._outage, should_stop=should_stop,
                                    deadline=deadline)

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

    # -- the work horse ---------------------------------------------------------------------
    def setup_work_horse_signals(self):
        super().setup_work_horse_signals()
        signal.signal(signal.SIGTERM, _ignore_signal)
        die_with_parent(self.pid)

    def _in_horse(self, func, doing):
        """``func()`` in the work horse, retried through a Redis outage for OUTCOME_WAIT_SECONDS;
        after that the horse exits with EX_TEMPFAIL and its worker puts the job back."""
        outage = OutageLog(self.log, f"Work horse of worker {self.name}")
        backoff = Backoff(self.resilience.redis_retry_max)
        started = time.monotonic()
        while True:
            try:
                value = func()
            except REDIS_ERRORS as exc:
                outage.failed(exc, doing)
                if time.monotonic() - started >= self.resilience.outcome_wait:
                    self.log.error("Work horse of worker %s: could not %s for %g s; the job goes back to its "
                                   "queue and may run again", self.name, doing, self.resilience.outcome_wait)
                    os._exit(EX_TEMPFAIL)
                time.sleep(backoff.next())
                continue
            outage.ok()
            return value

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
