"""The workers ``manage.py rqworker`` runs: rq's, with this project's guarantees.

``OptimaWorker`` (rq's forking ``Worker``; django-rq's WORKER_CLASS) and ``OptimaSimpleWorker``
(rq's fork-free ``SimpleWorker``, ``rqworker --no-fork``) share one base, ``WorkerBehaviour``; its
MRO is that class, then rq's. This module is a map: each override hands over to a collaborator,
and the comment on its ``def`` names the process that runs it. ``worker``: the worker's main
process (rq's loop, the signals, a horse's supervision). ``horse``: the process that runs the job
(OptimaWorker's forked work horse, or the OptimaSimpleWorker itself). ``both``: the horse, and the
worker too (``handle_job_failure`` also runs in the worker when it settles a killed horse's job).

==============================================  ================================================
stop, grace, cold stop                          ``stop.py``: ``StopState``, ``first_signal``
registration; keys of the wrong type in rq's    ``quarantine.py`` (``registration``, ``maintenance``)
dequeue, pause, the trust gate                  ``intake.py``: ``Intake`` (``dequeue.py``, ``gate``)
an attempt's start, success; through outages    ``attempt.py``; ``horse.py``: ``record_for``
one job in a forking worker / a fork-free one   ``settle.py``: ``watch``; ``inprocess.py``
retry policy, dead letters                      ``failures/handler.py``: ``FailureHandler``
heartbeat, metrics, retention, relay, upkeep    ``housekeeping.py``: ``Housekeeping``
liveness, abandoned jobs; RQ's scheduler        ``liveness.py``, ``abandoned.py``; ``periodic/``
rq's private members                            ``rqcompat.py`` (nothing else touches one)
metrics, tracing, logs: the job's concerns      ``queues/events/hooks.py`` (installed by apps.py)
writes riding on a success's or burial's MULTI  ``hooks.success_into`` / ``dead_into`` (batches)
==============================================  ================================================

Why overrides and not rq's extension points: its exception handlers run only for a job that
raised (not for a killed horse, a success, a start); its job callbacks are dotted names in the job
hash, imported by the worker: what whoever writes to Redis must not control. rq's loop, forking,
and success and failure bookkeeping are kept.
"""

import gc
from functools import cached_property

from django.db import close_old_connections, connections
from redis import ResponseError
from rq import SimpleWorker, Worker
from rq.job import JobStatus
from rq.serializers import JSONSerializer
from rq.utils import now
from rq.worker import BaseWorker
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.catalog.lookup import OptimaJob, OptimaQueue, queue_names
from queues.connection.outage import REDIS_ERRORS, Backoff, OutageLog
from queues.events import hooks
from queues.failures.handler import FailureHandler
from queues.jobs import resume
from queues.keyspace import quarantine
from queues.periodic.supervision import SchedulerKeeper
from queues.worker import attempt, fastpath, horse, settle, stop
from queues.worker.abandoned import LIVENESS_MARK
from queues.worker.attempt import NotStarted
from queues.worker.housekeeping import Housekeeping
from queues.worker.inprocess import InProcessJob
from queues.worker.intake import Intake
from queues.worker.kernel import libc
from queues.worker.liveness import Lifeline
from queues.worker.options import options
from queues.worker.prefetch import FORK_FREE_AHEAD, Prefetch


class WorkerBehaviour(BaseWorker):
    """What OptimaWorker and OptimaSimpleWorker share. Each sets ``runs_jobs_in_process`` and says
    whether a job is running (``job_running()``) and how a stop ends it (``end_running_job()``)."""

    runs_jobs_in_process = False
    # Whether the success's one write (fastpath.finish) also writes the worker IDLE. The fork-free worker leaves it
    # to its next pop that finds nothing (intake.py): between two jobs of a drain it stays BUSY, two commands a job
    # fewer (issue 36). The concurrent worker writes its resting state there (BUSY while another job runs), when it
    # differs from the state last written: not BUSY again with each success of a drain (a command a job fewer).
    idle_with_success = True
    # Whether the success's round trip also carries the next pop (intake.Intake.pop_ahead): only a worker whose one
    # thread writes a success and then pops (the fork-free worker; not the concurrent one, whose jobs' threads write
    # their successes while its main thread pops, nor the forking one, whose horse writes them).
    pops_ahead = False
    starts_with_pop = False  # whether its pops start the jobs they pop (popstart.py)
    log_result_lifespan = False  # rq's "result is kept for N seconds" per job: queues/logs/ writes one line
    queue_class = OptimaQueue
    job_class = OptimaJob

    def start_held(self):  # worker
        """Start the jobs handed out and held back to be started together (the concurrent worker's); called before a
        pop goes to Redis (``Intake``). Holds none here."""

    def __init__(self, *args, shutdown_grace=None, **kwargs):  # worker
        kwargs.update(serializer=JSONSerializer, job_class=OptimaJob, queue_class=OptimaQueue)
        kwargs.setdefault("log_job_description", False)  # rq's success line names the id, not the arguments
        hooks.worker_init(self)  # e.g. rq's per-job lines at DEBUG (queues/logs/hook.py)
        super().__init__(*args, **kwargs)
        # No health-check PING: it would be the first command of every horse's fresh connection (one
        # more round trip per job); redis-py's default Retry covers a stale pooled connection anyway.
        self.connection.connection_pool.connection_kwargs["health_check_interval"] = 0
        self.stop = stop.StopState(self.resilience.shutdown_grace if shutdown_grace is None else float(shutdown_grace))
        self.max_connection_wait_time = self.resilience.redis_retry_max
        self.outage = OutageLog(self.log, f"Worker {self.name}")
        self.backoff = Backoff(self.resilience.redis_retry_max)
        self.failures = FailureHandler(self, horse.record_for)
        self.success_tally = fastpath.Tally()  # rq's counters of this worker, written once a second (fastpath.py)
        self.housekeeping = Housekeeping(self)
        self.intake = Intake(self)
        self.prefetch = Prefetch()  # quick jobs popped ahead (prefetch.py): the fork-free and concurrent workers
        self.lifeline = None

    @cached_property
    def resilience(self):  # worker
        """The validated OPTIMA_QUEUES_OPTIONS (``options.py``). Read on first use: rq's own
        ``__init__`` needs ``dequeue_timeout`` (its socket timeout) before ours runs."""
        return options()

    @property
    def shutdown_grace(self):  # worker
        return self.stop.grace

    @property
    def dequeue_timeout(self):  # worker
        """Seconds one blocking dequeue waits (rq: worker_ttl - 15 = 405 s): a stop is seen within it."""
        return self.resilience.dequeue_wait

    @property
    def connection_timeout(self):  # worker
        """Socket timeout of the worker's Redis client: a hung server is noticed in seconds."""
        return self.dequeue_timeout + 10

    def get_heartbeat_ttl(self, job, working_time=0.0):  # both
        """Started entries outlive their last heartbeat by STARTED_ENTRY_TTL_SECONDS: dead workers
        are found by liveness (abandoned.py), and rq's own clean-up must not get there first."""
        return int(super().get_heartbeat_ttl(job, working_time)) + self.resilience.started_entry_ttl

    # -- start and stop ---------------------------------------------------------------------
    def bootstrap(self, *args, **kwargs):  # worker
        rqcompat.install_signal_handlers(self)  # rq installs them only after starting its scheduler
        libc()  # loaded once here, inherited by every horse
        self.housekeeping.start()
        self.lifeline = Lifeline(
            self.name,
            self.connection,
            self.resilience,
            lambda: sorted(set(queue_names()) | set(self.queue_names())),
            self.log,
        )
        self.lifeline.beat()  # raises while Redis is away: rqworker retries the start
        resume.watch_stop(lambda: self.stop.requested)  # a long job pauses at its checkpoint (jobs/resume.py)
        super().bootstrap(*args, **kwargs)
        self.connection.hset(self.key, LIVENESS_MARK, int(self.resilience.liveness_ttl))
        self.lifeline.start()

    def register_birth(self):  # worker
        """rq's, with a key of the wrong type among its keys (a planted ``<p>:workers`` string) renamed
        aside; the hash the failed MULTI wrote would read as another live worker of this name: deleted."""
        quarantine.retry_once(
            self.connection,
            lambda: quarantine.registration(self),
            super().register_birth,
            who=f"Worker {self.name}",
            log=self.log,
            again=lambda: self.connection.delete(self.key),
        )

    def register_death(self):  # worker
        quarantine.retry_once(
            self.connection,
            lambda: quarantine.registration(self),
            super().register_death,
            who=f"Worker {self.name}",
            log=self.log,
        )

    def teardown(self):  # both (rq's horse tears down too: then rq's only)
        if self.is_horse:
            return super().teardown()
        self.housekeeping.stop()
        self.intake.give_back_ahead()
        if self.lifeline is not None:
            self.lifeline.stop()
        try:
            super().teardown()
        except REDIS_ERRORS as exc:
            self.log.warning(
                "Worker %s: could not unregister (%s); its registration expires by itself",
                self.name,
                type(exc).__name__,
            )

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None):  # worker
        """rq's private hook (listed in ``rqcompat.MEMBERS``): our scheduler, kept alive by housekeeping."""
        keeper = SchedulerKeeper(
            self, burst=burst, logging_level=logging_level, date_format=date_format, log_format=log_format
        )
        self.housekeeping.schedulers = keeper
        self.scheduler = keeper.start()

    def stop_scheduler(self):  # worker
        if self.housekeeping.schedulers is not None:
            self.housekeeping.schedulers.stop()

    def _install_signal_handlers(self):  # worker
        if not self.stop.requested:  # rq calls this again after bootstrap: keep a stop already asked for
            rqcompat.install_rq_signal_handlers(self)

    def request_stop(self, signum, frame):  # worker
        stop.first_signal(self, signum)

    def request_force_stop(self, signum, frame):  # worker
        stop.second_signal(self, signum)

    # -- the main loop and its Redis calls, outage-proof -----------------------------------
    def heartbeat(self, timeout=None, pipeline=None):  # worker (a no-op in the horse)
        """rq's heartbeat into a pipeline; on its own, one ``Housekeeping.flush``."""
        if timeout:
            timeout = min(timeout, self.worker_ttl + 60)  # started entries live long on purpose; this not
        if pipeline is not None:
            return super().heartbeat(timeout, pipeline)
        if not self.is_horse:
            self.housekeeping.flush(timeout=timeout)

    def set_state(self, state, pipeline=None):  # both
        if pipeline is not None:
            return super().set_state(state, pipeline)
        try:
            super().set_state(state)
        except REDIS_ERRORS as exc:
            rqcompat.remember_state(self, state)
            self.outage.failed(exc, "record its state")
        except ResponseError as exc:  # its hash of another type (planted): set aside, re-registered within 30 s
            quarantine.settle(
                self.connection,
                lambda: {self.key: "hash"},
                exc,
                who=f"Worker {self.name}",
                what="record its state",
                log=self.log,
            )

    def resting_state(self):  # worker
        """The state ``set_state(IDLE)`` writes now (a concurrent worker stays BUSY while a job runs)."""
        return WorkerStatus.IDLE

    def check_for_suspension(self, burst):  # worker
        if not self.intake.suspension_due():  # rq's loop asks before every job: once a second is enough
            return
        try:
            return super().check_for_suspension(burst)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, "check for suspension")

    def run_maintenance_tasks(self):  # worker
        self.housekeeping.maintain(super().run_maintenance_tasks)

    def maintain_heartbeats(self, job, execution):  # worker
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, f"heartbeat job {job.id}")
        except ResponseError as exc:  # a key of another type (planted): set aside, the job goes on
            quarantine.settle(
                self.connection,
                lambda: quarantine.running(self, job, execution),
                exc,
                who=f"Worker {self.name}",
                what="heartbeat its job",
                log=self.log,
            )

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):  # worker
        return self.intake.next_job(timeout, max_idle_time)

    def jobs_to_pop(self):  # worker
        """How many jobs one pop may take (``dequeue.Dequeuer.pop``'s ``count``): one, for a worker that runs one."""
        return 1

    # -- one job ----------------------------------------------------------------------------
    def prepare_execution(self, job):  # worker
        return attempt.begin(self, job)

    def prepare_job_execution(self, job, remove_from_intermediate_queue=False):  # horse
        parent = super()  # the worker took the job out of the intermediate list: rq must not
        attempt.mark_started(self, job, lambda: parent.prepare_job_execution(job, False))

    def handle_execution_ended(self, job, queue, heartbeat_ttl):  # horse
        if attempt.ended_quietly(self, job):
            return
        try:
            super().handle_execution_ended(job, queue, heartbeat_ttl)
        except REDIS_ERRORS:
            job.ended_at = job.ended_at or now()  # only a heartbeat was lost

    def handle_job_success(self, job, queue, started_job_registry, execution):  # horse
        parent = super()
        attempt.mark_succeeded(
            self, job, queue, execution, lambda: parent.handle_job_success(job, queue, started_job_registry, execution)
        )

    def cleanup_execution(self, job, pipeline, execution=None):  # both
        super().cleanup_execution(job, pipeline, execution=execution)
        if pipeline is None:
            return
        status = job.get_status(refresh=False)
        if status == JobStatus.FINISHED:
            # A success's MULTI (rq's handle_job_success, fastpath.finish): the hooks' writes of it ride on it.
            hooks.success_into(job, pipeline)
        elif status in (JobStatus.FAILED, JobStatus.STOPPED) and isinstance(job.meta, dict) and job.meta.get("dead"):
            hooks.dead_into(job, pipeline)  # a burial's MULTI (rq's handle_job_failure after failures' decision)

    def perform_job(self, job, queue, execution):  # horse (a job's thread in the concurrent worker)
        around = hooks.processing(job)  # e.g. the attempt's span (queues/tracing/hook.py); None: nothing
        if around is None:
            return super().perform_job(job, queue, execution)
        with around:
            return super().perform_job(job, queue, execution)

    def handle_exception(self, job, *exc_info):  # horse
        self.failures.remember(job, exc_info)  # rq passes only its text to handle_job_failure
        if resume.is_pause(exc_info[1]):
            return  # a long job's pause at a checkpoint is no error (failures.handler: FailureHandler.pause)
        hooks.after_raise(job, exc_info)
        return super().handle_exception(job, *exc_info)

    def handle_job_failure(self, job, queue, started_job_registry=None, exc_string="", execution=None):  # both
        parent = super()
        self.failures.handle(
            job,
            queue,
            exc_string=exc_string,
            execution=execution,
            bury=lambda: parent.handle_job_failure(
                job, queue, started_job_registry=started_job_registry, exc_string=exc_string, execution=execution
            ),
        )

    def outcome_lost(self, job, queue, execution, why):  # both
        settle.outcome_lost(self, job, queue, execution, why)


class OptimaWorker(WorkerBehaviour, Worker):
    """The forking worker: each job runs in a work horse forked from this process."""

    def bootstrap(self, *args, **kwargs):  # worker
        self.housekeeping.report_pipe()  # opened before any fork: the horses report through it
        super().bootstrap(*args, **kwargs)
        # What is loaded now is left out of GC passes: a horse's collections do not copy shared pages.
        gc.collect()
        gc.freeze()

    def job_running(self):  # worker
        return bool(rqcompat.horse_pid(self))

    def end_running_job(self):  # worker
        self.kill_horse()

    def execute_job(self, job, queue):  # worker
        connections.close_all()  # a database connection of this process must not be shared with the horse
        try:
            execution = self.prepare_execution(job)
        except NotStarted:
            self.set_state(WorkerStatus.IDLE)
            return
        self.fork_work_horse(job, queue)
        self.monitor_work_horse(job, queue, execution)
        self.set_state(WorkerStatus.IDLE)
        self.housekeeping.after_job(job, queue)

    def setup_work_horse_signals(self):  # horse
        super().setup_work_horse_signals()
        horse.become_horse(self.pid)

    def perform_job(self, job, queue, execution):  # horse
        try:
            return super().perform_job(job, queue, execution)
        finally:
            if self.is_horse:
                self.housekeeping.ship()  # the hooks' writes, to the worker; then they see the horse leave

    def monitor_work_horse(self, job, queue, execution):  # worker
        settle.watch(self, job, queue, execution)


class OptimaSimpleWorker(WorkerBehaviour, SimpleWorker):
    """The fork-free worker (``rqworker --no-fork``): jobs run in this process, for trusted
    I/O-bound jobs. Same attempts, backoff, dead letters, liveness and outage handling; what it
    gives up is in docs/operations.md (no hard kill at timeout + 60 s or at the end of the grace;
    a job that crashes the interpreter takes the worker with it)."""

    runs_jobs_in_process = True
    idle_with_success = False
    pops_ahead = True
    starts_with_pop = True

    def __init__(self, *args, **kwargs):  # worker
        super().__init__(*args, **kwargs)
        self.in_process = InProcessJob(self)
        self.housekeeping.metrics_ride_on_jobs = lambda: True  # the successes write them (fastpath.Tally)

    def job_running(self):  # worker
        return self.in_process.current is not None

    def bootstrap(self, *args, **kwargs):  # worker
        super().bootstrap(*args, **kwargs)
        self.lifeline.on_beat = self.beat

    def beat(self, connection):  # worker (its lifeline thread)
        """The lifeline's beat: the running job's heartbeat, and the jobs popped ahead of it held too long back to
        their queues (``prefetch.py``: the main thread is in the job)."""
        self.in_process.beat(connection)
        self.prefetch.give_back_held(self)

    def jobs_to_pop(self):  # worker
        """One job a pop, ``FORK_FREE_AHEAD`` while the jobs are quick (``prefetch.py``): the pop on a success's
        round trip then comes once for that many jobs, the script's own commands with it (issue 36)."""
        return FORK_FREE_AHEAD if self.prefetch.quick() else 1

    def request_stop(self, signum, frame):  # worker
        super().request_stop(signum, frame)
        if self.job_running():  # its timer thread is started by the lifeline: a signal handler starts no thread
            stop.errand(self, lambda connection: self.in_process.arm_grace())

    def end_running_job(self):  # worker
        self.in_process.end()

    def execute_job(self, job, queue):  # worker (and horse: the job runs here)
        close_old_connections()
        try:
            execution = self.prepare_execution(job)
        except NotStarted:
            self.set_state(WorkerStatus.IDLE)
            return
        with self.in_process.running(job, queue, execution):
            self.perform_job(job, queue, execution)
        self.prefetch.note(job)
        if not fastpath.recorded(self, job) and self.get_state() != WorkerStatus.IDLE:
            self.set_state(WorkerStatus.IDLE)  # a success recorded by fastpath stays BUSY until a pop finds nothing
        self.housekeeping.after_job(job, queue)


__all__ = ["OptimaWorker", "OptimaSimpleWorker", "WorkerBehaviour", "NotStarted"]
