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
import signal
import time
from datetime import timedelta

from rq import worker_registration
from rq.exceptions import StopRequested
from rq.utils import now
from rq.worker.base import signal_name

from .abandoned import LIVENESS_MARK
from .config import options
from .dequeue import ReliableDequeue
from .horse import WorkHorseMixin
from .liveness import Lifeline
from .outage import REDIS_ERRORS, Backoff, OutageLog, wait_until_reachable
from .schedulers import ResilientRQScheduler
from .supervision import JobSupervisionMixin


def reliable_queue_class(base, worker):
    """``base`` (the worker's queue class) with ``ReliableDequeue``'s dequeue, bound to ``worker``."""
    return type(f"Reliable{base.__name__}", (ReliableDequeue, base), {"worker": worker, "__module__": __name__})


class ResilienceMixin(JobSupervisionMixin, WorkHorseMixin):
    """The worker's main process: start, stop, signals, and its own Redis calls made outage-proof.
    ``JobSupervisionMixin`` (one job, from dequeue to outcome) and ``WorkHorseMixin`` (inside the
    forked horse) use its attributes: ``resilience`` (options), ``shutdown_grace``, ``_outage``."""

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

    def released_job(self, job):
        """The dequeued job went back to its queue (pause): nothing is in hand, a stop may proceed."""
        self._holding = False
        super().released_job(job)

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
