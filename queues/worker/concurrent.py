"""``rqworker --concurrency N``: up to N jobs at once in one fork-free process.

``OptimaConcurrentWorker`` is ``OptimaSimpleWorker`` whose jobs run in a bounded pool of threads
(``slots.py``) instead of its main thread. The main thread keeps rq's loop and ours (``Intake``:
pause, trust gate, housekeeping, stop) and pops only while a slot is free, as many jobs in one pop as slots are
free, and while the jobs are quick as many again, held until a slot frees (``jobs_to_pop``: a job held over a
second goes back to its queue for another worker). The pop starts the jobs it takes (``popstart.py``): the main
thread hands each to its thread with its start written, and its only round trip for them is the pop (a Redis a few
milliseconds away: bench/peers.py workload C).
The jobs a pop took and could not start (``popstart.py`` says which) are started together, in one round trip of
the main thread (``attempt.begin_together``, ``start_held``); such a job popped alone starts in its own thread
(``attempt.begin``). Each job then runs in its thread through the fork-free worker's own per-job path
(``perform_job``: the job, its success or ``failures/``). The jobs' threads share their round trips: a start or a
success that is ready while another thread's is on its way goes with the others that queued up meanwhile, in one
write (``connection/combine.py``), and so does the main thread's pop (``dequeue.Dequeuer._run``).
``async def`` jobs take the same path: rq runs each coroutine with its own ``asyncio.run``, in the job's
thread (``rqworker --async N``, ``asyncworker.py``, runs them on one event loop instead).

What rq keeps in single slots is kept per job: the exception a failure handler holds
(``PerJobFailures``), the stop-job mark (``rqcompat.StoppedJobPerThread`` over ``Slot.stopped``),
the running jobs (``JobThreads``; ``worker.executions`` is already a dict). Per job, as in the
fork-free worker:

==============================  ================================================================
timeout                         ``watchdog.py``: rq's JobTimeoutException raised into the job's
                                thread; still running 60 s later (blocked in C code): the attempt
                                is recorded as failed, the worker takes no new job and exits 1
                                once the others ended or went back (the supervisor restarts it)
SIGTERM                         no new job; running ones may finish within the grace; then every
                                one still running goes back to the head of its band, attempt not
                                counted (``supervision.return_to_queue``), and the process exits 0
second signal                   the same at once
SIGKILL                         every started entry names this worker: the abandoned-job scan
                                re-runs each once the lifeline stops beating
stop-job (panel, rq's command)  rq's ``stop-job``/``stop-execution`` reach the one job they name:
                                an exception raised into its thread; failed as stopped, no retry
database                        one Django connection per thread (Django's are thread-local),
                                closed after each job in that thread
==============================  ================================================================
"""

import logging
import os
import sys

from django.db import close_old_connections, connections
from rq.command import parse_payload
from rq.exceptions import StopRequested
from rq.job import JobStatus
from rq.utils import now
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.connection import combine
from queues.connection.outage import REDIS_ERRORS
from queues.failures.handler import FailureHandler
from queues.jobs import meta as jobmeta
from queues.worker import abandoned, attempt, horse, popstart, supervision
from queues.worker.adapter import OptimaSimpleWorker, WorkerBehaviour
from queues.worker.attempt import NotStarted
from queues.worker.settle import STOPPED_BY_USER
from queues.worker.slots import FINISHING, RUNNING, WITHDRAWN, JobThreads, Slot, Withdrawn
from queues.worker.watchdog import (
    HARD_TIMEOUT_MARGIN_SECONDS,
    Watchdog,
    clear_in_thread,
    raise_in_thread,
    timeout_error,
)

FINISHING_WAIT_SECONDS = 5.0  # a job recording its outcome when the worker stops: waited for this long
# Jobs one pop takes at most when that many slots are free: one Lua call of a bounded length (each job is ~5
# commands inside it), the jobs shared out among workers that pop at once.
POP_AT_MOST = 32
# Connections beyond one per slot: the main thread's, the pubsub thread's, the lifeline's, the watchdog's, the
# scheduler keeper's and the housekeeping's, with room to spare.
POOL_MARGIN = 16


class JobStopped(Exception):
    """Raised into a job's thread by rq's stop-job command (the forking worker kills the horse)."""

    def __init__(self, *args):
        super().__init__("Job stopped by user")


class PerJobFailures(FailureHandler):
    """The failure handler with the exception of each job held apart (rq's one slot per worker)."""

    def __init__(self, worker, record_for):
        super().__init__(worker, record_for)
        self.held = {}

    def remember(self, job, exc_info):
        self.held[job.id] = exc_info

    def take(self, job):
        return self.held.pop(job.id, None)


class OptimaConcurrentWorker(rqcompat.StoppedJobPerThread, OptimaSimpleWorker):
    """Up to ``concurrency`` jobs at once, each in a thread of this process (``rqworker --concurrency``)."""

    hard_timeout_margin = HARD_TIMEOUT_MARGIN_SECONDS  # past the timeout, a job blocked in C code is given up on

    def __init__(self, *args, concurrency=1, **kwargs):  # worker
        super().__init__(*args, **kwargs)
        self.concurrency = int(concurrency)
        self.threads = JobThreads(self.concurrency, self.run_in_thread, f"Worker {self.name}", log=self.log)
        self.failures = PerJobFailures(self, horse.record_for)
        self.watchdog = Watchdog(self.wedged, f"Worker {self.name}", margin=self.hard_timeout_margin, log=self.log)
        self.death_penalty_class = self.watchdog.penalty_class
        self.exit_code = 0
        self.withdrew = False
        self.held = []  # slots of the jobs one pop took, handed out and not yet started (``start_held``)
        self._size_pool()
        combine.enable(self.connection)  # the starts, successes and pops, several threads' in one round trip

    def _size_pool(self):  # worker
        """Room in the connection pool for every slot's round trip at once, and the worker's own threads: redis-py
        8's pool holds 100 connections unless told otherwise, and past that a round trip fails with
        MaxConnectionsError (seen at ``--async 500`` once a pop handed 32 jobs to slots at once: their starts
        and successes were waited out as an outage). Only ever raised, never lowered."""
        pool = self.connection.connection_pool
        needed = self.concurrency + POOL_MARGIN
        if isinstance(getattr(pool, "max_connections", None), int) and pool.max_connections < needed:
            pool.max_connections = needed

    # -- rq's single slots, per job -------------------------------------------------------------
    def stopped_job_here(self):  # a job's thread
        threads = getattr(self, "threads", None)
        slot = threads.mine() if threads is not None else None
        return slot.job.id if slot is not None and slot.stopped else None

    def forget_stopped_job_here(self):  # a job's thread
        threads = getattr(self, "threads", None)
        slot = threads.mine() if threads is not None else None
        if slot is not None:
            slot.stopped = False

    idle_with_success = True  # its resting state, written with each success (adapter.WorkerBehaviour)
    pops_ahead = False  # its main thread pops while the jobs' threads write their successes

    def job_running(self):  # worker
        return self.threads.busy()

    def resting_state(self):  # worker and job threads
        if getattr(self, "threads", None) is not None and self.threads.busy():
            return WorkerStatus.BUSY  # busy while any job runs
        return WorkerStatus.IDLE

    def set_state(self, state, pipeline=None):  # worker and job threads
        super().set_state(self.resting_state() if state == WorkerStatus.IDLE else state, pipeline)

    # -- start and stop -------------------------------------------------------------------------
    def bootstrap(self, *args, **kwargs):  # worker
        super().bootstrap(*args, **kwargs)
        self.lifeline.on_beat = self.beat
        self.housekeeping.metrics_ride_on_jobs = self.job_running  # a running job's success writes them
        self.watchdog.start()

    def beat(self, connection):  # lifeline thread
        """The lifeline's beat while jobs run: the main thread may be waiting for a slot."""
        if self.threads.busy():
            connection.expire(self.key, self.worker_ttl + 60)

    def request_stop(self, signum, frame):  # worker
        WorkerBehaviour.request_stop(self, signum, frame)  # no grace timer: the main thread watches it

    def end_running_job(self):  # worker (a second stop signal)
        self.give_back_all(self.stop.take_interrupted() or "its worker received a second stop signal")
        self.quit()

    def teardown(self):  # worker
        if not self.is_horse:
            self.start_held()
            self.intake.give_back_ahead()  # jobs popped ahead of a slot: for another worker now, not after the grace
            self.drain()
        self.watchdog.halt()
        super().teardown()
        if self.exit_code or self.threads.stuck():
            self.quit(unregister=False)

    def drain(self):  # worker
        """Wait for the running jobs; past the grace of a stop, every one still running goes back."""
        while self.threads.busy():
            if self.stop.requested and self.stop.grace_over():
                self.stop.interrupt(f"the shutdown grace period of {self.stop.grace:g} s ran out")
                self.log.warning("Worker %s: stopping: %s", self.name, self.stop.interrupted)
                self.give_back_all(self.stop.take_interrupted())
                self.quit()
            self.idle_duties()
            self.threads.wait(0.2)
        self.after_jobs()

    def quit(self, unregister=True):  # worker (or the end of its teardown)
        """Exit now: threads of jobs that were taken back (or are stuck in C code) must not go on."""
        if unregister:  # (no flush of the metrics here: this may run in a signal handler, amid one)
            try:
                self.lifeline.stop()
                self.register_death()
            except Exception:  # noqa: BLE001 — exiting anyway
                pass
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(self.exit_code)

    def give_back_all(self, why):  # worker
        """Every job still running goes back to the head of its band, its attempt not counted; the jobs popped and
        not yet handed to a slot, to the head of their queues."""
        held, self.held = self.held, []
        self.intake.give_back_ahead()
        for slot in self.threads.active():  # the held ones too: not started, they go back from the intermediate list
            if slot.claim(WITHDRAWN):
                self.withdrew = True
                self.give_back(slot, why)
        for slot in held:
            self.threads.start(slot)  # withdrawn: its thread returns at once
        self.wait_finishing()

    def give_back(self, slot, why):  # worker
        job, queue = slot.job, slot.queue
        band = queue.band(jobmeta.band(job)) if hasattr(queue, "band") else queue
        if slot.execution is None:  # withdrawn before its thread started it: still in the intermediate list
            self._give_back_unstarted(job, queue, why)
            return
        try:
            if job.get_status(refresh=True) == JobStatus.STARTED:  # not if it ended a moment ago
                supervision.return_to_queue(self.connection, job, band, slot.execution, why)
                self.log.warning(
                    "Worker %s: job %s back at the head of %s, attempt not counted: %s",
                    self.name,
                    job.id,
                    queue.name,
                    why,
                )
        except REDIS_ERRORS:
            self.log.error(
                "Worker %s: Redis unreachable; job %s stays registered as started and the other "
                "workers will re-run it once this one is gone",
                self.name,
                job.id,
            )

    def _give_back_unstarted(self, job, queue, why):  # worker
        try:
            if abandoned.give_back(self.connection, queue.key, job.id):
                self.log.warning(
                    "Worker %s: job %s back at the head of %s, not started: %s", self.name, job.id, queue.name, why
                )
        except REDIS_ERRORS:
            pass  # left in the intermediate list: the abandoned-job scan returns it

    def wait_finishing(self):  # worker
        """Jobs recording their outcome right now: let them finish doing so (a few seconds at most)."""
        deadline = now().timestamp() + FINISHING_WAIT_SECONDS
        while any(slot.state == FINISHING for slot in self.threads.active()) and now().timestamp() < deadline:
            self.threads.wait(0.1)

    # -- the main loop ----------------------------------------------------------------------
    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):  # worker
        """A job to run, once a slot is free (rq's loop pops only then)."""
        if not self.threads.has_free():
            self.start_held()
        while not self.threads.has_free():
            self.idle_duties()
            self.prefetch.give_back_held(self)
            if self.stop.requested:
                raise StopRequested()
            self.threads.wait_free(0.5)
        self.after_jobs()
        return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)

    def jobs_to_pop(self):  # worker
        """As many jobs as slots are free (at most ``POP_AT_MOST``): one pop, one round trip, for all of them; the
        main thread takes the others from the dequeuer without Redis (issue 36). While the jobs are quick, up to
        ``concurrency`` more, held until a slot frees (``prefetch.py``): slots then free one at a time, and each
        would otherwise cost a pop of one job (``--concurrency 8`` no-op jobs: a command a job fewer and 5 % of
        redis-server's instructions, docs/decisions.md)."""
        free = self.threads.free()
        if self.prefetch.quick():
            free += self.concurrency
        return min(free, POP_AT_MOST)

    def run_maintenance_tasks(self):  # worker
        try:
            super().run_maintenance_tasks()
        finally:
            connections.close_all()  # the dead letters' reconcile: no connection held for 10 minutes

    def idle_duties(self):  # worker
        self.after_jobs()
        self.housekeeping.tick()
        self.housekeeping.flush()

    def after_jobs(self):  # worker
        """The per-job housekeeping of the jobs that ended, in this (the main) thread."""
        for slot in self.threads.ended():
            self.housekeeping.after_job(slot.job, slot.queue)
            self.prefetch.note(slot.job)

    def execute_job(self, job, queue):  # worker: the job starts and runs in a thread of the pool
        """The job held in a slot of its own; once the pop that took it has handed out its last job, the starts of
        those it took together are written here in one round trip and each goes to its thread
        (``start_held``). A job popped alone starts in its thread (``attempt.begin``): the main thread then waits
        for no round trip but its pops (a Redis a few milliseconds away, bench/peers.py workload C). A job its pop
        started (``popstart.py``: most are) goes to its thread at once, its start written already."""
        if popstart.carried(job):  # its pop started it (popstart.py): to its thread at once, no round trip
            try:
                execution = self.prepare_execution(job)  # a stop asked for meanwhile: given back instead
            except NotStarted:
                return
            self.threads.start(Slot(job, queue, execution))
            return
        slot = Slot(job, queue, None)
        self.threads.hold(slot)
        self.held.append(slot)
        if not self.intake.dequeuer.popped:
            self.start_held()

    def start_held(self):  # worker
        """The held slots to their threads, their starts written together when they are several
        (``attempt.begin_together``): a slot whose start did not land goes with none, its thread's ``begin`` writes
        it (or gives the job back) as for a job popped alone. Called too before the main thread pops from Redis or
        waits for a slot (a job of the pop refused by the gate), and at its teardown. A signal handler that takes
        the jobs back amid it (``give_back_all``) finds a slot unstarted: if its start lands all the same, the job
        is left started by this worker, which exits, and the abandoned-job scan runs it again."""
        slots, self.held = self.held, []
        if not slots:
            return
        if len(slots) > 1:
            live = [slot for slot in slots if slot.state == RUNNING]
            for slot, execution in zip(live, attempt.begin_together(self, [slot.job for slot in live])):
                with slot.lock:
                    slot.execution = execution
        for slot in slots:
            self.threads.start(slot)

    # -- in a job's thread ------------------------------------------------------------------
    def run_in_thread(self, slot):  # a job's thread
        """The job's start, unless the main thread wrote it with the others of its pop (``start_held``), and then
        the job. A job popped alone is started here (``attempt.begin``: its execution, the started registry), not
        in the main thread: the main thread's round trips per job are then the pop alone, so a Redis a few
        milliseconds away does not cap the worker at one start per two round trips (issue 36, bench/peers.py
        workload C). Under the slot's lock: a worker taking the job back first (``give_back``) finds it unstarted,
        in the intermediate list, and returns it from there; one taking it back after finds its execution."""
        close_old_connections()
        try:
            with slot.lock:
                if slot.state != RUNNING:
                    return  # taken back before it started (give_back returned it from the intermediate list)
                try:
                    if slot.execution is None:  # not started with the others of its pop (``start_held``)
                        slot.execution = self.prepare_execution(slot.job)
                except NotStarted:
                    slot.state = WITHDRAWN  # given back by the start itself: nothing of it is this thread's
                    return
                stopped = slot.stopped  # stop-job came before this thread took the job
            if stopped:
                raise_in_thread(slot.ident, JobStopped)
            self.perform_job(slot.job, slot.queue, slot.execution)
        finally:
            connections.close_all()

    def handle_execution_ended(self, job, queue, heartbeat_ttl):  # a job's thread
        slot = self.threads.mine()
        if slot is not None and not slot.claim(FINISHING) and slot.state == WITHDRAWN:
            raise Withdrawn()  # the worker took the job back or failed it: its outcome is not ours
        if slot is not None and slot.stopped and slot.state == FINISHING:
            clear_in_thread(slot.ident)  # a stop that came as the job returned: it is recording its outcome
        super().handle_execution_ended(job, queue, heartbeat_ttl)

    def handle_job_failure(self, job, queue, started_job_registry=None, exc_string="", execution=None):  # both
        slot = self.threads.mine()
        if slot is not None and slot.stopped and slot.job.id == job.id:
            exc_string = STOPPED_BY_USER  # as the forking worker records a stopped job
        super().handle_job_failure(
            job, queue, started_job_registry=started_job_registry, exc_string=exc_string, execution=execution
        )

    # -- rq's commands (the pubsub thread) and the watchdog -----------------------------------
    def handle_payload(self, message):  # pubsub thread
        payload = parse_payload(message)
        if payload.get("command") == "stop-job":
            self.stop_job(self.threads.find(job_id=payload.get("job_id")), payload.get("job_id"))
            return
        super().handle_payload(message)

    def request_stop_execution(self, execution_id):  # pubsub thread (rq's stop-execution command)
        self.stop_job(self.threads.find(execution_id=execution_id), execution_id)

    def stop_job(self, slot, named):  # pubsub thread
        if slot is None:
            self.log.warning("Worker %s: not running %s, stop command ignored", self.name, named)
            return
        with slot.lock:
            if slot.state != "running":
                return
            slot.stopped = True
            if slot.ident is not None:
                self.interrupt(slot, JobStopped)
        self.log.warning("Worker %s: stopping job %s on request", self.name, slot.job.id)

    def interrupt(self, slot, exc_class):  # pubsub or watchdog thread, holding slot.lock
        """Stop the job of ``slot`` with ``exc_class`` (a stop, a timeout): raised into its thread."""
        raise_in_thread(slot.ident, exc_class)

    def wedged(self, penalty):  # watchdog thread
        """An attempt still running ``HARD_TIMEOUT_MARGIN_SECONDS`` past its timeout (blocked in C
        code): recorded as failed now (retry or dead letter); no new job, and the process exits 1
        once the other jobs ended or went back (a supervisor starts a fresh one)."""
        slot = self.threads.find(ident=penalty.ident)
        if slot is None or not slot.claim(WITHDRAWN):
            return
        self.log.error(
            "Worker %s: job %s still running %g s past its timeout of %g s (blocked where Python cannot "
            "interrupt it): attempt failed; this worker takes no new job and exits once the others are "
            "done",
            self.name,
            slot.job.id,
            self.watchdog.margin,
            penalty.seconds,
        )
        self.exit_code = 1
        self.stop.request(running=True)
        rqcompat.request_stop(self, now())
        error = timeout_error(penalty.seconds)()
        slot.job.ended_at = now()
        self.failures.remember(slot.job, (type(error), error, None))
        self.handle_job_failure(
            slot.job,
            slot.queue,
            exc_string=f"{type(error).__module__}.JobTimeoutException: {error}",
            execution=slot.execution,
        )


__all__ = ["OptimaConcurrentWorker", "JobStopped"]
