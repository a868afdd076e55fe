"""A worker's housekeeping, in its main process: everything it writes besides the jobs themselves.

One object, ``Housekeeping``, so that the worker's writes share round trips:

- ``flush``: one pipeline with the worker's heartbeat (at most every ``HEARTBEAT_EVERY`` seconds
  unless rq asks for one), the writes the hooks hold (``queues/events/hooks.py``: the metrics, with
  what the work horses handed over; a concurrent worker's running jobs carry them instead,
  ``metrics_ride_on_jobs``) and the retention re-scores (``jobs/retention.py``: ``Completions``). After
  a heartbeat that was due: registering again a worker a restarted Redis forgot, and the hooks'
  ``heartbeat`` (the panel's history sample).
- ``after_job``: retention bookkeeping of the job that just ended, then a flush. So per job this
  layer adds no round trip of its own (none at all after a success of the fork-free worker, whose
  MULTI carries its metrics and its precise score: ``fastpath.py``).
- ``tick``: every couple of seconds, also while a job runs: the RQ scheduler keeper
  (``periodic/supervision.py``), the outbox relay (``producer/outbox.py``) and, every
  ``RATE_BACKSTOP_SECONDS``, the release of the rate-limited keys that are due (``producer/rates.py``: the RQ
  scheduler's timer releases them on time; this is the backstop while no scheduler runs).
- ``maintain``: rq's maintenance every ``maintenance_interval``, plus the dead letters' reconcile and the
  search index's trim;
  nothing there (Redis away, a database down, a key of the wrong type: ``queues/keyspace/quarantine.py``)
  ever ends the worker.

The horses hand the hooks' writes over through a pipe, one JSON line each (``report_pipe`` in the
worker, ``ship`` in the horse): a horse never writes metrics to Redis itself.
"""

import json
import logging
import os
import time

import redis
from rq import worker_registration
from rq.utils import now

from queues.connection.outage import REDIS_ERRORS
from queues.events import hooks
from queues.failures.deadletter import reconcile_if_due
from queues.jobs.retention import Completions
from queues.keyspace import quarantine
from queues.producer import outbox, rates
from queues.search import index as search_index
from queues.worker import fastpath
from queues.worker.abandoned import LIVENESS_MARK

HEARTBEAT_EVERY = 5.0  # seconds between the worker's own heartbeats when nothing else is to write
REGISTRATION_CHECK_EVERY = 30.0  # seconds between checks that Redis still knows this worker
RATE_BACKSTOP_SECONDS = 2.0  # seconds between a worker's releases of due rate keys (one Lua call)

logger = logging.getLogger("queues.metrics")  # the name its lines had when the metrics owned the pipe


class Housekeeping:
    def __init__(self, worker):
        self.worker = worker
        self.completions = Completions()
        self.schedulers = None  # the worker's SchedulerKeeper, once rq starts its scheduler
        self._reports = None  # (read end, write end) of the pipe the horses hand the hooks' writes through
        self._next_beat = 0.0
        self._next_rate_release = 0.0
        self._registered_after = 0  # outage episodes seen at the latest registration check
        self._next_registration_check = 0.0
        # True while the pending metrics will be written by a running job's own write: a concurrent
        # worker's threads carry the tally in their success's one call (``fastpath.finish``), so its
        # main thread writes it only with a heartbeat that is due or on going idle, not after every
        # job (with 32 jobs at once, that was a pipeline of its own every other job)
        self.metrics_ride_on_jobs = lambda: False

    def start(self):
        hooks.worker_start(self.worker)  # the metrics ride on the heartbeat pipeline from now on

    def stop(self):
        self.flush(idle=True)
        hooks.worker_stop(self.worker)

    def report_pipe(self):
        """Open the pipe the work horses hand the hooks' writes to the worker through (before any fork)."""
        read, write = os.pipe()
        os.set_blocking(read, False)
        self._reports = (read, write)

    def ship(self):
        """In a work horse, after its job: hand what the hooks hold to the worker (one line), then tell
        them the horse leaves."""
        handed = hooks.hand_over() if self._reports is not None else None
        if handed:
            try:
                os.write(self._reports[1], (json.dumps(handed, separators=(",", ":")) + "\n").encode())
            except OSError as exc:
                logger.warning("could not hand a job's metrics to the worker (%s)", exc)
        hooks.horse_exit()

    def _receive(self):
        """In the worker: what its horses handed over (the read end is non-blocking)."""
        chunks = []
        while True:
            try:
                chunk = os.read(self._reports[0], 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        for line in b"".join(chunks).splitlines():
            try:
                hooks.take_over(json.loads(line))
            except ValueError:
                logger.warning("ignored an unreadable metrics record from a work horse")

    def flush(self, timeout=None, idle=False):
        """One pipeline: the heartbeat (when due, or when rq passes a ``timeout``), pending metrics
        and retention re-scores. A Redis error is logged once per outage and never raised."""
        worker = self.worker
        moment = time.monotonic()
        if self._reports is not None:
            self._receive()
        due = bool(timeout) or moment >= self._next_beat
        tally = worker.success_tally  # rq's counters of the worker the successes left to write (fastpath.Tally)
        metrics = (hooks.pending() or tally.pending()) and (due or idle or not self.metrics_ride_on_jobs())
        if due or metrics or self.completions.scores:
            data = counted = None
            try:
                with worker.connection.pipeline(transaction=False) as pipe:
                    if due:
                        worker.heartbeat(timeout, pipe)
                    counted = tally.take_into(pipe, worker.key, None, write=True)
                    data = hooks.write_into(pipe)
                    self.completions.rescore_into(pipe)
                    pipe.execute()
            except REDIS_ERRORS as exc:
                if data is not None:
                    hooks.restore(data)
                tally.give_back(counted)
                worker.outage.failed(exc, "heartbeat")
                return
            except redis.ResponseError as exc:  # the other commands of the pipeline were applied: not merged back
                quarantine.settle(
                    worker.connection,
                    lambda: quarantine.flush(worker),
                    exc,
                    who=f"Worker {worker.name}",
                    what="write its heartbeat and metrics",
                    log=worker.log,
                )
            worker.outage.ok()
            if due:
                self._next_beat = moment + HEARTBEAT_EVERY
                self._check_registration(moment)
                hooks.heartbeat(worker.connection)
        self.completions.trim(idle=idle)  # on going idle even with nothing else to write

    def after_job(self, job, queue):
        """Retention bookkeeping of the job that just ended; a flush when something is to write (not
        after a success ``fastpath.finish`` recorded, metrics, score and all)."""
        self.completions.note(queue, job, rescore=not fastpath.recorded(self.worker, job))
        self.flush()

    def tick(self):
        """Some scheduler holds our queues' locks; the outbox's relay pushes what a commit left behind."""
        if self.schedulers is not None:
            self.schedulers.tick()
        outbox.relay_if_due()
        moment = time.monotonic()
        if moment >= self._next_rate_release:
            self._next_rate_release = moment + RATE_BACKSTOP_SECONDS
            try:
                rates.release_due(self.worker.connection)
            except redis.RedisError as exc:
                self.worker.outage.failed(exc, "release the rate-limited jobs that are due")

    def maintain(self, rq_maintenance):
        """rq's maintenance (``rq_maintenance()``: its registries' clean-up), then the dead letters'
        reconcile and the search index's trim (search/index.py); a failure is logged and tried again at the
        next maintenance."""
        worker = self.worker
        try:
            # rq's clean-up reads keys and set members whatever they hold: a key of another type, or a
            # member that is not text, is set aside, then once more (the failed run's lock released first)
            quarantine.retry_once(
                worker.connection,
                lambda: quarantine.maintenance(worker.connection, worker.queues, worker.redis_workers_keys),
                rq_maintenance,
                who=f"Worker {worker.name}",
                log=worker.log,
                members=lambda: quarantine.worker_sets(worker.queues, worker.redis_workers_keys),
                again=lambda: [queue.release_maintenance_lock() for queue in worker.queues],
            )
            reconcile_if_due(worker.connection, [queue.name for queue in worker.queues])  # its queues' server
            search_index.trim(worker.connection, [queue.name for queue in worker.queues])  # bounded: 2 round trips
        except REDIS_ERRORS as exc:
            worker.outage.failed(exc, "run maintenance")
        except Exception:  # noqa: BLE001 — maintenance (e.g. a database being down) never ends the worker
            worker.log.exception(
                "Worker %s: maintenance failed; next try in %s s", worker.name, worker.maintenance_interval
            )
        finally:
            worker.last_cleaned_at = now()

    def _check_registration(self, moment):
        """After an outage (and every 30 s): a Redis restarted without its data has forgotten this
        worker; register it again so that panels and metrics still count it."""
        worker = self.worker
        if worker.outage.episodes == self._registered_after and moment < self._next_registration_check:
            return
        self._registered_after = worker.outage.episodes
        self._next_registration_check = moment + REGISTRATION_CHECK_EVERY
        try:
            registered = quarantine.contain(
                worker.connection,
                lambda: quarantine.registration(worker),
                self._register_again,
                who=f"Worker {worker.name}",
                what="register again",
                log=worker.log,
            )
        except REDIS_ERRORS as exc:
            worker.outage.failed(exc, "register again")
            return
        if registered:
            worker.log.warning("Worker %s: Redis had lost this worker's registration; registered again", worker.name)

    def _register_again(self):
        """True when Redis had forgotten this worker and it registered again."""
        worker = self.worker
        if worker.connection.hexists(worker.key, "birth") or worker.birth_date is None:
            return False
        with worker.connection.pipeline() as pipe:
            pipe.hset(worker.key, mapping=worker.serialize())
            pipe.hset(
                worker.key, mapping={"state": worker.get_state(), LIVENESS_MARK: int(worker.resilience.liveness_ttl)}
            )
            worker_registration.register(worker, pipe)
            pipe.expire(worker.key, worker.worker_ttl + 60)
            pipe.execute()
        return True
