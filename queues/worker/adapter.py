"""The workers ``manage.py rqworker`` runs: rq's, with this project's guarantees.

``OptimaWorker`` (rq's forking ``Worker``; django-rq's WORKER_CLASS) and ``OptimaSimpleWorker``
(rq's fork-free ``SimpleWorker``, ``rqworker --no-fork``) share one base, ``WorkerBehaviour``; its
MRO is that class, then rq's. Each override below is short and hands over to a plain object of its
own module, each tested in-process:

================================  ==============================================================
concern                           where
================================  ==============================================================
stop, grace, cold stop            ``resilience/stop.py``: ``StopState``
dequeue, pause                    ``resilience/dequeue.py``: ``Dequeuer`` (one Lua pop, pause-aware)
liveness, abandoned jobs          ``resilience/liveness.py``: ``Lifeline`` (thread), ``abandoned.py``
Redis outages                     ``resilience/outage.py``; in the job's process ``resilience/horse.py``
one job in a forking worker       ``resilience/supervision.py``: ``HorseWatch``, ``verdict``
retry policy, dead letters        ``retry.py`` (pure), ``failures.py`` (``FailureHandler``)
metrics, retention                ``metrics/recorder.py`` (``Tally``), ``retention.py`` (``Completions``)
RQ's scheduler                    ``resilience/schedulers.py``
rq's private members              ``rqcompat.py`` (nothing else touches one)
================================  ==============================================================

Why overrides and not rq's extension points: rq's exception handlers run only for a job that
raised (not for a killed horse, a success, a start), and its job callbacks are dotted names stored
in the job hash and imported by the worker — exactly what whoever can write to Redis must not
control. rq's loop (``work``), its forking, its success and failure bookkeeping are kept.

The job's process (the horse, or the fork-free worker itself) records the start and the outcome
through a Redis outage (``horse.record``); the worker's own Redis calls never end it.
Per job, this layer adds no round trip of its own: the pause check is inside the pop, metrics and
retention ride on the heartbeat pipeline after each job, and a horse that exited 0 needs no check.

Trust boundary (``gate.py``): a popped job runs only when it reads as JSON, names a declared job
(``catalog.py``) and carries a valid signature (``signing.py``); otherwise it is dead-lettered
(``corrupt``, ``not_a_job``, ``unsigned``) without anything of it imported, and the worker goes on.
"""
import gc
import os
import signal
import threading
import time

from django.db import close_old_connections, connections
from rq import SimpleWorker, Worker, worker_registration
from rq.exceptions import StopRequested
from rq.job import JobStatus
from rq.serializers import JSONSerializer
from rq.utils import now
from rq.worker import BaseWorker
from rq.worker.base import WorkerStatus, signal_name

from queues import keys, rqcompat

from queues.worker import signals as events

from queues.jobs import gate

from queues.jobs import meta as jobmeta

from queues.producer import limits

from queues.producer import outbox
from queues.failures.handler import FailureHandler, duration
from queues.metrics.recorder import tally
from queues.catalog.lookup import OptimaJob, OptimaQueue, queue_names
from queues.worker import horse, supervision
from queues.worker.abandoned import LIVENESS_MARK, give_back
from queues.worker.options import options
from queues.worker.dequeue import Dequeuer
from queues.worker.liveness import Lifeline, libc
from queues.connection.outage import REDIS_ERRORS, Backoff, OutageLog, wait_until_reachable
from queues.periodic.supervision import SchedulerKeeper
from queues.worker.stop import StopState
from queues.jobs.retention import Completions


class NotStarted(Exception):
    """A dequeued job went back to its queue instead of starting (stop request, outage)."""


HEARTBEAT_EVERY = 5.0  # seconds between the worker's own heartbeats when nothing else is to write


class WorkerBehaviour(BaseWorker):
    """What OptimaWorker and OptimaSimpleWorker share. Subclasses set ``runs_jobs_in_process``."""

    runs_jobs_in_process = False
    queue_class = OptimaQueue
    job_class = OptimaJob

    def __init__(self, *args, shutdown_grace=None, **kwargs):
        kwargs.update(serializer=JSONSerializer, job_class=OptimaJob, queue_class=OptimaQueue)
        super().__init__(*args, **kwargs)
        # No health-check PING: every work horse opens a fresh connection, and the first command on
        # it would be a PING (one more round trip per job). A stale pooled connection is retried by
        # redis-py's default Retry anyway, and the worker talks to Redis every few seconds.
        self.connection.connection_pool.connection_kwargs["health_check_interval"] = 0
        self.resilience = options()
        grace = self.resilience.shutdown_grace if shutdown_grace is None else float(shutdown_grace)
        self.stop = StopState(grace)
        self.max_connection_wait_time = self.resilience.redis_retry_max
        self.outage = OutageLog(self.log, f"Worker {self.name}")
        self.backoff = Backoff(self.resilience.redis_retry_max)
        self.failures = FailureHandler(self)
        self.completions = Completions()
        self.dequeuer = Dequeuer(self.connection, poll_cap=self.resilience.multi_queue_poll,
                                 should_stop=lambda: self.stop.requested, log=self.log, who=f"Worker {self.name}")
        self.schedulers = None
        self.lifeline = None
        self._next_beat = 0.0
        self._registered_after = 0  # outage episodes seen at the latest registration check
        self._next_registration_check = 0.0
        self._paused_logged = set()

    @property
    def shutdown_grace(self):
        return self.stop.grace

    # -- timeouts ---------------------------------------------------------------------------
    @property
    def dequeue_timeout(self):
        """Seconds one blocking dequeue waits (rq: worker_ttl - 15 = 405 s): a stop is seen within it."""
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
        rqcompat.install_signal_handlers(self)  # rq installs them only after starting its scheduler
        libc()  # loaded once here, inherited by every horse
        tally.deferred = True  # metrics ride on the heartbeat pipeline (metrics/recorder.py)
        self.lifeline = Lifeline(self.name, self.connection, self.resilience,
                                 lambda: sorted(set(queue_names()) | set(self.queue_names())), self.log)
        self.lifeline.beat()  # raises while Redis is away: rqworker retries the start
        super().bootstrap(*args, **kwargs)
        self.connection.hset(self.key, LIVENESS_MARK, int(self.resilience.liveness_ttl))
        self.lifeline.start()

    def teardown(self):
        if self.is_horse:
            return super().teardown()
        self._flush(idle=True)
        tally.deferred = False
        if self.lifeline is not None:
            self.lifeline.stop()
        try:
            super().teardown()
        except REDIS_ERRORS as exc:
            self.log.warning("Worker %s: could not unregister (%s); its registration expires by itself",
                             self.name, type(exc).__name__)

    def _start_scheduler(self, burst=False, logging_level="INFO", date_format=None, log_format=None):
        self.schedulers = SchedulerKeeper(self, burst=burst, logging_level=logging_level, date_format=date_format,
                                          log_format=log_format)
        self.scheduler = self.schedulers.start()

    def stop_scheduler(self):
        if self.schedulers is not None:
            self.schedulers.stop()

    def _install_signal_handlers(self):
        if not self.stop.requested:  # rq calls this again after bootstrap: keep a stop already asked for
            rqcompat.install_rq_signal_handlers(self)

    def request_stop(self, signum, frame):
        """First SIGTERM/SIGINT: take no new job; the running one may finish within the grace period.
        Never raises (rq raises StopRequested when idle, which could strand a popped job)."""
        running = self.job_running()
        self.stop.request(running)
        rqcompat.request_stop(self, now())
        signal.signal(signal.SIGINT, self.request_force_stop)
        signal.signal(signal.SIGTERM, self.request_force_stop)
        if running:
            self.log.warning(
                "Worker %s: %s: taking no new job; the running one may finish within %g s, then it goes back "
                "to its queue (a second signal does that now)", self.name, signal_name(signum), self.stop.grace)
            try:
                self.set_shutdown_requested_date()
            except REDIS_ERRORS:
                pass
        else:
            self.log.warning("Worker %s: %s: stopping", self.name, signal_name(signum))
        self.stop_scheduler()

    def request_force_stop(self, signum, frame):
        """Second signal: the running job goes back to its queue now; then the worker exits 0."""
        if self.stop.repeated():
            return  # the same stop, delivered twice (e.g. by a pool and by the terminal)
        if self.job_running():
            self.log.warning("Worker %s: %s again: stopping the running job now; it goes back to its queue",
                             self.name, signal_name(signum))
            self.stop.request_cold("its worker received a second stop signal")
            self.end_running_job()
            return
        self.log.warning("Worker %s: %s again: exiting now", self.name, signal_name(signum))
        raise SystemExit(0)

    # -- the main loop's Redis calls, outage-proof ------------------------------------------
    def heartbeat(self, timeout=None, pipeline=None):
        """rq's heartbeat, pipelined (one round trip, rq makes three) and at most every
        HEARTBEAT_EVERY seconds unless metrics or retention have something to write."""
        if timeout:
            timeout = min(timeout, self.worker_ttl + 60)  # started entries live long on purpose; this not
        if pipeline is not None:
            return super().heartbeat(timeout, pipeline)
        if self.is_horse:
            return None
        self._flush(timeout=timeout)

    def _flush(self, timeout=None, idle=False):
        """One pipeline: the heartbeat (when due), pending metrics and retention re-scores."""
        moment = time.monotonic()
        fd = getattr(self, "_report_r", None)
        if fd is not None:
            tally.receive(fd)
        due = bool(timeout) or moment >= self._next_beat
        if due or tally.pending() or self.completions.scores:
            data = None
            try:
                with self.connection.pipeline(transaction=False) as pipe:
                    if due:
                        super().heartbeat(timeout, pipe)
                    data = tally.flush_into(pipe)
                    self.completions.rescore_into(pipe)
                    pipe.execute()
            except REDIS_ERRORS as exc:
                if data is not None:
                    tally.merge(data)
                self.outage.failed(exc, "heartbeat")
                return
            self.outage.ok()
            if due:
                self._next_beat = moment + HEARTBEAT_EVERY
                self._check_registration(moment)
                self._sample_history()
        self.completions.trim(idle=idle)  # on going idle even with nothing else to write

    def _sample_history(self):
        """The panel's recent history (metrics/history.py): on a due heartbeat, once per wall-clock
        minute per worker, try to take the minute's sample; a Redis lock lets one worker win. Never
        per job, and one SET a minute when another worker already sampled."""
        from queues.metrics import history

        minute = int(time.time() // history.MINUTE)
        if getattr(self, "_history_minute", None) != minute:
            self._history_minute = minute
            history.sample_if_due(self.connection)

    def _check_registration(self, moment):
        """After an outage (and every 30 s): a Redis restarted without its data has forgotten this
        worker; register it again so that panels and metrics still count it."""
        if self.outage.episodes == self._registered_after and moment < self._next_registration_check:
            return
        self._registered_after = self.outage.episodes
        self._next_registration_check = moment + 30
        try:
            if self.connection.hexists(self.key, "birth") or self.birth_date is None:
                return
            with self.connection.pipeline() as pipe:
                pipe.hset(self.key, mapping=self.serialize())
                pipe.hset(self.key, mapping={"state": self.get_state(),
                                             LIVENESS_MARK: int(self.resilience.liveness_ttl)})
                worker_registration.register(self, pipe)
                pipe.expire(self.key, self.worker_ttl + 60)
                pipe.execute()
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, "register again")
            return
        self.log.warning("Worker %s: Redis had lost this worker's registration; registered again", self.name)

    def set_state(self, state, pipeline=None):
        if pipeline is not None:
            return super().set_state(state, pipeline)
        try:
            super().set_state(state)
        except REDIS_ERRORS as exc:
            rqcompat.remember_state(self, state)
            self.outage.failed(exc, "record its state")

    def check_for_suspension(self, burst):
        try:
            return super().check_for_suspension(burst)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, "check for suspension")

    def run_maintenance_tasks(self):
        from queues.failures.deadletter import reconcile_if_due

        try:
            super().run_maintenance_tasks()
            reconcile_if_due(self.connection)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, "run maintenance")
        except Exception:  # noqa: BLE001 — maintenance (e.g. a database being down) never ends the worker
            self.log.exception("Worker %s: maintenance failed; next try in %s s", self.name, self.maintenance_interval)
        finally:
            self.last_cleaned_at = now()

    def maintain_heartbeats(self, job, execution):
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, f"heartbeat job {job.id}")

    def tick(self):
        """Every couple of seconds, also while a job runs: some scheduler holds our queues' locks, and
        the outbox's relay pushes what a commit left behind (queues/producer/outbox.py)."""
        if self.schedulers is not None:
            self.schedulers.tick()
        outbox.relay_if_due()

    # -- dequeue ----------------------------------------------------------------------------
    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """rq's dequeue loop with ``Dequeuer`` (pause-aware, never loses a popped job), stop
        requests seen between waits, and Redis outages waited out."""
        self.set_state(WorkerStatus.IDLE)
        self.procline("Listening on " + ",".join(self.queue_names()))
        idle_until = None if max_idle_time is None else time.monotonic() + max_idle_time
        while True:
            self.heartbeat()
            if self.should_run_maintenance_tasks:
                self.run_maintenance_tasks()
            self.tick()
            if self.stop.requested:
                raise StopRequested()
            wait = timeout
            if wait is not None and idle_until is not None:
                wait = max(1, min(wait, int(idle_until - time.monotonic() + 0.999)))
            try:
                found = self.dequeuer.pop(rqcompat.ordered_queues(self), wait)
                self._log_paused()
                if found is None:
                    self._flush(idle=True)
                    if timeout is None or (idle_until is not None and time.monotonic() >= idle_until):
                        return None
                    continue
                queue, job_id = found
                job = self._fetch(queue, job_id)
            except REDIS_ERRORS as exc:
                self.outage.failed(exc, "dequeue")
                wait_until_reachable(self.connection, self.backoff, self.outage,
                                     should_stop=lambda: self.stop.requested)
                continue
            if job is None:
                continue
            if self.stop.requested:
                give_back(self.connection, queue.key, job.id)
                raise StopRequested()
            self.reorder_queues(reference_queue=queue)
            job.redis_server_version = self.get_redis_server_version()
            self.log.info("Worker %s: %s: %s", self.name, queue.name, job.id)
            return job, queue

    def _fetch(self, queue, job_id):
        """The popped job, read as JSON and vetted (``gate.vet``); None when it must not run: then it
        is dead-lettered or dropped (``gate``), never the end of the worker."""
        from rq.exceptions import NoSuchJobError

        try:
            job = self.job_class.fetch(job_id, connection=self.connection, serializer=self.serializer)
        except NoSuchJobError:
            if self.connection.exists(keys.job_key(job_id)):  # a hash without data
                return self._refuse(gate.bury_raw, self, queue, job_id, "has no data field")
            self.connection.lrem(keys.intermediate_key(queue.key), 1, job_id)
            self.log.error("Worker %s: dropped job %s of queue %s: its hash %s is gone", self.name, job_id, queue.name,
                           keys.job_key(job_id))
            return None
        except REDIS_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 — e.g. a pickled or garbled hash, a key of another type
            return self._refuse(gate.bury_raw, self, queue, job_id, f"cannot be read ({type(exc).__name__})")
        refusal = gate.vet(job, queue.name)
        if refusal is not None:
            self._refuse(gate.refuse, self, job, queue, refusal)
            if limits.is_limited(job):  # refused without running: its limit key's slot goes to the next
                limits.release(job)
            return None
        return job

    def _refuse(self, how, *args):
        """Run a refusal of ``gate``; if even that fails (other than by a Redis outage, which the
        dequeue loop waits out), the id is dropped from the intermediate list with an ERROR."""
        try:
            how(*args)
        except REDIS_ERRORS:
            raise
        except Exception:  # noqa: BLE001
            queue, job_id = (args[1], args[2]) if how is gate.bury_raw else (args[2], args[1].id)
            self.log.exception("Worker %s: could not dead-letter job %s of queue %s; dropped from the queue "
                               "(its hash %s is left as it is)", self.name, job_id, queue.name, keys.job_key(job_id))
            self.connection.lrem(keys.intermediate_key(queue.key), 1, job_id)
        return None

    def _log_paused(self):
        paused = self.dequeuer.paused & set(self.queue_names())
        if paused != self._paused_logged:
            if paused:
                self.log.info("Worker %s: paused queues left alone: %s", self.name, ", ".join(sorted(paused)))
                self.procline("Paused: " + ", ".join(sorted(paused)))
            else:
                self.log.info("Worker %s: no paused queue any more", self.name)
            self._paused_logged = paused

    # -- one job: start ---------------------------------------------------------------------
    def prepare_execution(self, job):
        """rq's prepare_execution, plus: the job leaves the intermediate list in the same MULTI,
        and a stop request (or Redis going away) gives it back instead (``NotStarted``)."""
        from rq.executions import Execution

        queue_key = keys.queue_key(job.origin)
        if self.stop.requested:
            self._give_back(job, queue_key, "the worker is stopping")
            raise NotStarted()
        execution = None
        try:
            with self.connection.pipeline() as pipe:
                execution = Execution.create(job, self.get_heartbeat_ttl(job), pipeline=pipe, worker_name=self.name)
                self.set_state(WorkerStatus.BUSY, pipeline=pipe)
                pipe.lrem(keys.intermediate_key(queue_key), 1, job.id)
                pipe.execute()
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, f"start job {job.id}")
            if not wait_until_reachable(self.connection, self.backoff, self.outage,
                                        should_stop=lambda: self.stop.requested):
                raise NotStarted() from None  # still in the intermediate list: the abandoned-job scan returns it
            if execution is None or self.connection.zscore(job.started_job_registry.key,
                                                           execution.composite_key) is None:
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

    def prepare_job_execution(self, job, remove_from_intermediate_queue=False):
        """In the job's process: mark it started (through an outage); the parent already took it
        out of the intermediate list. A dead job requeued by an operator starts a new life."""
        parent = super()
        self._record(lambda: parent.prepare_job_execution(job, False), f"mark job {job.id} started")
        if jobmeta.new_life(job.meta):
            try:
                job.save_meta()
            except Exception:  # noqa: BLE001 — the attempt counter is not worth failing the job for
                self.log.exception("Could not reset the attempts of requeued dead job %s", job.id)
        events.send(events.job_started, queue=jobmeta.queue_name(job), job=job)

    def _record(self, func, doing):
        in_horse = self.is_horse
        who = f"Work horse of worker {self.name}" if in_horse else f"Worker {self.name}"
        return horse.record(func, doing, options=self.resilience, log=self.log, who=who, in_horse=in_horse,
                            should_stop=lambda: self.stop.requested)

    # -- one job: outcome -------------------------------------------------------------------
    def handle_execution_ended(self, job, queue, heartbeat_ttl):
        try:
            super().handle_execution_ended(job, queue, heartbeat_ttl)
        except REDIS_ERRORS:
            job.ended_at = job.ended_at or now()  # only a heartbeat was lost

    def handle_job_success(self, job, queue, started_job_registry, execution):
        parent = super()
        self._record(horse.success_recorder(
            lambda: parent.handle_job_success(job, queue, started_job_registry, execution), job),
            f"record the success of job {job.id}")
        events.send(events.job_succeeded, queue=jobmeta.queue_name(job), job=job, duration=duration(job))

    def handle_exception(self, job, *exc_info):
        self.failures.remember(job, exc_info)  # rq passes only its text to handle_job_failure
        return super().handle_exception(job, *exc_info)

    def handle_job_failure(self, job, queue, started_job_registry=None, exc_string="", execution=None):
        if self.is_horse or self.runs_jobs_in_process:
            # Record the failure once Redis answers (the retry policy needs it), not half of it now.
            self._record(self.connection.ping, f"record the failure of job {job.id}")
        exc_info = self.failures.take(job)
        stopped = rqcompat.stopped_job_id(self) == job.id
        decision = self.failures.judge(job, exc_info, stopped=stopped)
        if decision.retry:
            try:
                self.failures.retry(job, queue, decision.delay, exc_info, exc_string, execution)
            except Exception:  # noqa: BLE001 — the job must not be lost: it goes back instead
                self.log.exception("Worker %s: failed to schedule the retry of job %s", self.name, job.id)
                self.outcome_lost(job, queue, execution, "its retry could not be scheduled")
            return
        self.failures.before_burial(job, decision.reason, exc_info, exc_string)
        super().handle_job_failure(job, queue, started_job_registry=started_job_registry, exc_string=exc_string,
                                   execution=execution)
        self.failures.after_burial(job, decision.reason, exc_string)

    def outcome_lost(self, job, queue, execution, why):
        """The job's outcome could not be written: in a horse, exit EX_TEMPFAIL (the worker puts
        it back); in the worker's process, put it back now."""
        if self.is_horse:
            os._exit(horse.EX_TEMPFAIL)
        try:
            supervision.return_to_queue(self.connection, job, queue, execution, why)
        except REDIS_ERRORS:
            pass  # still registered as started: re-run by the scan once this worker is gone

    def after_job(self, job, queue):
        """In the worker's process, after any job: retention bookkeeping, then the flush."""
        self.completions.note(queue, job)
        self._flush()

    # -- to be provided by the two worker kinds ----------------------------------------------
    def job_running(self):
        raise NotImplementedError

    def end_running_job(self):
        raise NotImplementedError


class OptimaWorker(WorkerBehaviour, Worker):
    """The forking worker: each job runs in a work horse forked from this process."""

    def bootstrap(self, *args, **kwargs):
        # Horses hand their metrics to the worker through this pipe (metrics/recorder.py).
        self._report_r, self._report_w = os.pipe()
        os.set_blocking(self._report_r, False)
        super().bootstrap(*args, **kwargs)
        # Everything loaded so far (Django, the apps, rq) is left out of the garbage collector's
        # passes, so a horse's collections do not touch, and copy, the pages it shares with us.
        gc.collect()
        gc.freeze()

    def job_running(self):
        return bool(rqcompat.horse_pid(self))

    def end_running_job(self):
        self.kill_horse()

    def execute_job(self, job, queue):
        # A database connection of this process must not be shared with the forked horse.
        connections.close_all()
        try:
            execution = self.prepare_execution(job)
        except NotStarted:
            self.set_state(WorkerStatus.IDLE)
            return
        self.fork_work_horse(job, queue)
        self.monitor_work_horse(job, queue, execution)
        self.set_state(WorkerStatus.IDLE)
        self.after_job(job, queue)

    def setup_work_horse_signals(self):
        super().setup_work_horse_signals()
        horse.become_horse(self.pid)

    def perform_job(self, job, queue, execution):
        try:
            return super().perform_job(job, queue, execution)
        finally:
            if self.is_horse:
                tally.ship(self._report_w)

    def monitor_work_horse(self, job, queue, execution):
        """Wait for the horse (``HorseWatch``), then settle what it left undone (``verdict``)."""
        job.started_at = now()
        watch = supervision.HorseWatch(
            rqcompat.horse_pid(self), stop=self.stop, kill=self.kill_horse,
            beat=lambda: self.maintain_heartbeats(job, execution), tick=self.tick,
            beat_interval=self.job_monitoring_interval, job_timeout=job.timeout, log=self.log,
            worker_name=self.name, job_id=job.id)
        retpid, wait_status, rusage = watch.wait()
        rqcompat.set_horse_pid(self, 0)
        self.executions.pop(execution.id, None)
        interrupted = self.stop.take_interrupted()
        if interrupted is None and supervision.exit_code(wait_status) == 0:
            return  # the horse recorded the outcome itself
        self._settle(job, queue, execution, interrupted, retpid, wait_status, rusage)

    def _settle(self, job, queue, execution, interrupted, retpid, wait_status, rusage):
        """Make sure the horse's job ended somewhere, waiting for Redis as long as it takes — unless
        the worker is stopping: then for the grace period once more (5 s after a second signal),
        after which the job stays registered as started for the other workers to re-run."""
        give_up_at = None
        while True:
            limit = self.stop.settle_deadline()
            if give_up_at is None and limit is not None:
                give_up_at = time.monotonic() + limit
            if give_up_at is not None and time.monotonic() >= give_up_at:
                self.log.error("Worker %s: Redis unreachable; job %s stays registered as started and the other "
                               "workers will re-run or dead-letter it once this one is gone", self.name, job.id)
                return
            if not wait_until_reachable(self.connection, self.backoff, self.outage, deadline=time.monotonic() + 5):
                continue
            try:
                return self._settle_once(job, queue, execution, interrupted, retpid, wait_status, rusage)
            except REDIS_ERRORS as exc:
                self.outage.failed(exc, f"settle job {job.id}")

    def _settle_once(self, job, queue, execution, interrupted, retpid, wait_status, rusage):
        from rq.exceptions import InvalidJobOperation

        try:
            status = job.get_status(refresh=True)
        except InvalidJobOperation:
            return supervision.forget(self.connection, job, execution)  # deleted meanwhile
        registered = self.connection.zscore(queue.started_job_registry.key, execution.composite_key) is not None
        verdict = supervision.verdict(status=status, registered=registered, wait_status=wait_status,
                                      interrupted=interrupted, stopped=rqcompat.stopped_job_id(self) == job.id)
        if verdict.action == "requeue":
            supervision.return_to_queue(self.connection, job, queue, execution, verdict.why)
            self.log.warning("Worker %s: job %s back at the head of %s, attempt not counted: %s",
                             self.name, job.id, queue.name, verdict.why)
        elif verdict.action in ("stopped", "fail"):
            job.ended_at = now()
            why = "Job stopped by user, work-horse terminated." if verdict.action == "stopped" else verdict.why
            self.log.warning("Worker %s: job %s failed (%s)", self.name, job.id, why)
            if verdict.action == "fail":
                self.handle_work_horse_killed(job, retpid, wait_status, rusage)
            self.handle_job_failure(job, queue=queue, exc_string=why, execution=execution)
            if verdict.action == "stopped":
                rqcompat.forget_stopped_job(self)
            if (self.connection.zscore(queue.started_job_registry.key, execution.composite_key) is not None
                    and job.get_status(refresh=True) == JobStatus.STARTED):
                supervision.return_to_queue(self.connection, job, queue, execution, "its failure could not be recorded")
        elif verdict.action == "forget":
            supervision.forget(self.connection, job, execution)


class OptimaSimpleWorker(WorkerBehaviour, SimpleWorker):
    """The fork-free worker (``rqworker --no-fork``): jobs run in this process, for trusted
    I/O-bound jobs. Same attempts, backoff, dead letters, liveness and outage handling; what it
    gives up is in docs/operations.md (no hard kill at timeout + 60 s or at the end of the grace;
    a job that crashes the interpreter takes the worker with it)."""

    runs_jobs_in_process = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._running = None  # (job, queue, execution) while a job runs
        self._grace_timer = None

    def job_running(self):
        return self._running is not None

    def bootstrap(self, *args, **kwargs):
        super().bootstrap(*args, **kwargs)
        self.lifeline.on_beat = self._beat_while_running

    def _beat_while_running(self, connection):
        """From the lifeline thread while a job runs in the main thread (which cannot beat): keep
        the worker's registration alive, as a forking worker's monitoring loop does."""
        if self._running is not None:
            connection.expire(self.key, self.worker_ttl + 60)

    def request_stop(self, signum, frame):
        super().request_stop(signum, frame)
        if self._running is not None:
            self._arm_grace()

    def end_running_job(self):
        """Cold stop or grace over: the job goes back to the head of its queue and the process
        exits. Nothing is raised into the job's code: a job cannot be stopped from outside its
        thread safely, so the process ends under it (after the job is safely back)."""
        running = self._running
        if running is None:
            return
        job, queue, execution = running
        why = self.stop.take_interrupted() or "its worker stopped"
        try:
            if job.get_status(refresh=True) == JobStatus.STARTED:  # not if it ended a moment ago
                supervision.return_to_queue(self.connection, job, queue, execution, why)
                self.log.warning("Worker %s: job %s back at the head of %s, attempt not counted: %s; exiting",
                                 self.name, job.id, queue.name, why)
        except REDIS_ERRORS:
            self.log.error("Worker %s: Redis unreachable; job %s stays registered as started and the other "
                           "workers will re-run it once this one is gone", self.name, job.id)
        try:
            self.lifeline.stop()
            self.register_death()
        except Exception:  # noqa: BLE001 — exiting anyway
            pass
        os._exit(0)

    def _arm_grace(self):
        if self._grace_timer is not None:
            return

        def grace_over():
            if self._running is not None:
                self.stop.interrupt(f"the shutdown grace period of {self.stop.grace:g} s ran out")
                self.log.warning("Worker %s: stopping: %s", self.name, self.stop.interrupted)
                self.end_running_job()

        self._grace_timer = threading.Timer(self.stop.grace, grace_over)
        self._grace_timer.daemon = True
        self._grace_timer.start()

    def execute_job(self, job, queue):
        close_old_connections()
        try:
            execution = self.prepare_execution(job)
        except NotStarted:
            self.set_state(WorkerStatus.IDLE)
            return
        self._running = (job, queue, execution)
        if self.stop.requested:
            self._arm_grace()
        try:
            self.perform_job(job, queue, execution)
        finally:
            self._running = None
        self.set_state(WorkerStatus.IDLE)
        self.after_job(job, queue)


__all__ = ["OptimaWorker", "OptimaSimpleWorker", "WorkerBehaviour", "NotStarted"]
