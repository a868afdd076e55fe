"""Both schedulers, made to survive Redis outages and their own worker's death.

RQ's scheduler (``rqworker``, unless ``--without-scheduler``) moves due jobs — delayed enqueues and
every retry — from ``<p>:scheduled:<q>`` to the queue. rq 3.0 runs it as a child process of one
worker per queue, chosen by a lock ``<p>:scheduler-lock:<q>``, and:

- the child dies on the first Redis error, and its worker restarts it only at its next maintenance
  (every 10 minutes);
- the lock lives ``interval + 60`` s (61 s): a worker killed with SIGKILL stalls every retry of its
  queues for a minute, and the other workers only try to take the lock at *their* next maintenance.

``ResilientRQScheduler`` keeps RQ's scheduling code and changes those: its loop waits out Redis
errors; its lock lives ``SCHEDULER_LOCK_SECONDS`` (10 s) past the last heartbeat (one per second);
it dies with its worker; and every OptimaWorker checks every couple of seconds that some scheduler
holds its queues' locks, starting its own when the lock is free (``SchedulerKeeper.tick``). So the
scheduler of a killed worker is replaced within about ``SCHEDULER_LOCK_SECONDS``.

rq's move pushes each due job through a plain ``rq.Queue``, onto the queue's normal list: a job of a
priority band (``queues.jobs.meta.band``) would come back in the normal band after its delay or its
backoff, and a job with a rate (queues/producer/rates.py) would start uncharged by its key's budget.
``ResilientRQScheduler.enqueue_scheduled_jobs`` moves those itself first — the rated ones into their
rate's hold (``limits.enqueue_into``), the banded ones through ``OptimaQueue`` (whose push picks the band)
— and leaves the rest to rq. rq-scheduler's periodic jobs
already go through ``OptimaQueue`` (``PrefixedScheduler.queue_class``).

``run_rq_scheduler`` does the same for ``manage.py rqscheduler`` (rq-scheduler, periodic jobs), whose
``run()`` exits on the first Redis error.
"""

import logging
import os
import signal
import time
import uuid
from datetime import datetime

import redis
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.job import Job
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler
from rq.scripts import ACQUIRE_OR_REFRESH_LOCK_SCRIPT, acquire_or_refresh_lock
from rq.utils import as_text, current_timestamp, now, utcformat

from queues import rqcompat
from queues.catalog.lookup import OptimaJob, OptimaQueue
from queues.connection.outage import REDIS_ERRORS, Backoff, OutageLog, sleep, wait_until_reachable
from queues.failures.corrupt import bury_corrupt
from queues.jobs import gate
from queues.jobs import meta as jobmeta
from queues.keyspace import keys, quarantine
from queues.producer import limits, rates
from queues.worker.kernel import die_with_parent

logger = logging.getLogger("queues.resilience")


class ResilientRQScheduler(RQScheduler):
    def __init__(self, *args, lock_seconds=10, retry_max=5.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.lock_seconds = int(lock_seconds)
        self.retry_max = retry_max
        self.parent_pid = os.getpid()

    @property
    def should_reacquire_locks(self):
        """Missing some locks: try again after a lock's lifetime (rq waits 2 minutes)."""
        if rqcompat.scheduler_queue_names(self) == self.acquired_locks:
            return False
        if not self.lock_acquisition_time:
            return True
        return (datetime.now() - self.lock_acquisition_time).total_seconds() > self.lock_seconds

    def acquire_locks(self, auto_start=False):
        """RQ's acquire_locks with a lock of ``lock_seconds``."""
        successful = set()
        for name in rqcompat.scheduler_queue_names(self):
            outcome = acquire_or_refresh_lock(self.connection, self.get_locking_key(name), self.name, self.lock_seconds)
            if outcome == "acquired":
                self.log.info("Acquired scheduler lock for %s", name)
            if outcome in ("acquired", "refreshed"):
                successful.add(name)
        rqcompat.set_scheduler_locks(self, successful)
        self.lock_acquisition_time = datetime.now()
        process = rqcompat.scheduler_process(self)
        if successful and auto_start and (not process or not process.is_alive()):
            self.start()
        return successful

    def heartbeat(self):
        """RQ's heartbeat with a lock of ``lock_seconds``."""
        self.last_heartbeat = now()
        names = sorted(rqcompat.scheduler_locks(self))
        script = self.connection.register_script(ACQUIRE_OR_REFRESH_LOCK_SCRIPT)
        with self.connection.pipeline() as pipe:
            pipe.hset(self.key, "last_heartbeat", utcformat(self.last_heartbeat))
            pipe.expire(self.key, self.interval + 60)
            for name in names:
                script(keys=[self.get_locking_key(name)], args=[self.name, self.lock_seconds], client=pipe)
            results = pipe.execute()
        lost = {name for name, outcome in zip(names, results[2:]) if outcome == 0}
        if lost:
            self.log.warning("Scheduler locks for %s were taken over by another scheduler", ", ".join(sorted(lost)))
            rqcompat.set_scheduler_locks(self, rqcompat.scheduler_locks(self) - lost)

    def expected_keys(self):
        """{key: type} of what moving due jobs touches (``queues.keyspace.quarantine``): the scheduled registries,
        the first due jobs' hashes, the queues, the locks and this scheduler's hash."""
        names = rqcompat.scheduler_queue_names(self)
        expected = quarantine.scheduler(self.connection, names, self.key)
        expected.update({self.get_locking_key(name): "string" for name in names})
        return expected

    def guarded(self, call, what):
        """``call()`` inside the quarantine boundary: a key of the wrong type is renamed aside and ``call()``
        runs once more; any other entry it cannot read is reported once and skipped (None)."""
        return quarantine.contain(
            self.connection, self.expected_keys, call, who=f"RQ scheduler {self.name}", what=what, log=self.log
        )

    def move_due_jobs(self):
        """rq's ``enqueue_scheduled_jobs`` in the boundary. rq stops the whole move at the first due job
        it cannot read (an id it rejects, a hash it cannot restore, an id that is not UTF-8): those are
        dead-lettered ``corrupt`` with their raw hash and leave the registry, then the move runs again."""
        who = f"RQ scheduler {self.name}"
        try:
            return quarantine.retry_once(
                self.connection, self.expected_keys, self.enqueue_scheduled_jobs, who=who, log=self.log
            )
        except REDIS_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001
            rqcompat.forget_scheduled_registries(self)
            if not self.bury_unreadable():
                quarantine.report(exc, who=who, what="move due jobs to their queues", log=self.log)
                return None
        return self.guarded(self.enqueue_scheduled_jobs, "move due jobs to their queues")

    def enqueue_scheduled_jobs(self):
        """rq's move of the due jobs to their queues, after moving here those with a rate (into their rate's
        hold) and those of a priority band.

        rq pushes through a plain ``rq.Queue``, whose push ignores the band, and knows only the concurrency
        of a limit key, not its rate; the others keep rq's code (a job with a limit key has no band:
        ``queues.enqueue`` refuses both)."""
        self.drop_replayed_due_jobs()
        self.move_own_due_jobs()
        return super().enqueue_scheduled_jobs()

    def drop_replayed_due_jobs(self):
        """Issue 32: rq's move sets every due job ``queued`` and pushes it, so an id added to a scheduled
        registry would run again whatever its hash says. A due id whose hash belongs to another queue
        (``gate.elsewhere``) or says the job must not run again (``gate.replayed``: finished, dead, stopped,
        started by a live worker) leaves the registry with one WARNING, its hash untouched; the rest (and what
        cannot be read: ``move_due_jobs`` buries it) is left to the move. -> how many dropped."""
        dropped = 0
        for name in sorted(rqcompat.scheduler_locks(self)):
            registry = keys.scheduled_key(name)
            job_ids = [as_text(i) for i in self.connection.zrangebyscore(registry, 0, time.time(), start=0, num=500)]
            if not job_ids:
                continue
            try:
                jobs = OptimaJob.fetch_many(job_ids, connection=self.connection)
            except REDIS_ERRORS:
                raise
            except Exception:  # noqa: BLE001 — an unreadable one: rq's move raises on it and it is buried
                continue
            with self.connection.pipeline(transaction=False) as pipe:
                for job_id in job_ids:
                    pipe.hget(keys.job_key(job_id), jobmeta.PUT_BACK)
                marks = pipe.execute(raise_on_error=False)
            for job_id, job, mark in zip(job_ids, jobs, marks):
                if job is None:
                    continue
                home = gate.elsewhere(job, name)
                why = (
                    f"due in the scheduled registry of {name} but its hash belongs to queue {home}"
                    if home is not None
                    else gate.replayed(
                        job,
                        put_back=mark if isinstance(mark, bytes) else None,
                        is_alive=lambda worker: bool(self.connection.exists(keys.alive_key(worker))),
                    )
                )
                if why is None:
                    continue
                if home is None:
                    why = f"due in the scheduled registry of {name} but {why}"
                self.connection.zrem(registry, job_id)
                gate.report_dropped(job_id, why)
                dropped += 1
        return dropped

    def move_own_due_jobs(self):
        """The due jobs rq's move would push wrong, each queue's read once and moved in one MULTI, off the
        scheduled registry:

        - a job with a rate (queues/producer/rates.py: a delayed enqueue, a retry after its backoff, a debounced
          job) into its rate's hold (``limits.enqueue_into``, which hands it on to its concurrency limit too,
          when it has one), so that each start is charged to its key's budget: rq's move would push it straight
          onto the queue (or, with a concurrency, through that alone);
        - a job of a high or low band onto its band (``OptimaQueue``'s push): rq's would push it onto the normal
          band.

        A due id without a hash is left to rq's move, which drops it; one that cannot be read raises here as it
        would in rq's (``move_due_jobs`` buries it). -> how many moved."""
        moved = 0
        for name in sorted(rqcompat.scheduler_locks(self)):
            registry = ScheduledJobRegistry(name, connection=self.connection, serializer=self.serializer)
            job_ids = registry.get_jobs_to_schedule(current_timestamp())
            if not job_ids:
                continue
            rated, banded = [], []
            for job in OptimaJob.fetch_many(job_ids, connection=self.connection):
                if job is None:
                    continue
                if rates.of(job) is not None:
                    rated.append(job)
                elif jobmeta.band(job) != jobmeta.NORMAL and not job.has_rate_limit:
                    banded.append(job)
            if not rated and not banded:
                continue
            queue = OptimaQueue(name, connection=self.connection)
            with self.connection.pipeline() as pipeline:
                for job in rated:
                    registry.remove(job.id, pipeline=pipeline)
                    limits.enqueue_into(queue, job, pipeline)
                for job in banded:
                    rqcompat.enqueue_prepared(queue, job, pipeline)
                    registry.remove(job.id, pipeline=pipeline)
                pipeline.execute()
            moved += len(rated) + len(banded)
        return moved

    def bury_unreadable(self):
        """The due jobs of this scheduler's queues that rq cannot read, out of their scheduled registry
        (dead letters when there is a hash to keep); -> how many."""

        buried = 0
        for name in sorted(rqcompat.scheduler_locks(self)):
            registry = keys.scheduled_key(name)
            for member in self.connection.zrangebyscore(registry, 0, time.time(), start=0, num=quarantine.DUE_MEMBERS):
                try:
                    Job.fetch_many([as_text(member)], connection=self.connection, serializer=self.serializer)
                    continue
                except REDIS_ERRORS:
                    raise
                except Exception as exc:  # noqa: BLE001 — what rq's move would raise on
                    why = f"cannot be read by RQ's scheduler ({type(exc).__name__})"
                fields = self._raw_hash(member)
                self.connection.zrem(registry, member)
                buried += 1
                if fields:
                    bury_corrupt(self.connection, as_text(member), name, fields, why, worker_name=self.name)
                else:
                    self.log.error(
                        "RQ scheduler %s: removed %r from %s: it %s and has no hash to keep",
                        self.name,
                        member,
                        registry,
                        why,
                    )
        return buried

    def _raw_hash(self, member):
        try:
            return self.connection.hgetall(keys.job_key(as_text(member)))
        except (UnicodeDecodeError, redis.ResponseError):
            return {}

    def work(self):
        """RQ's scheduler loop (in the forked child), waiting out Redis errors instead of dying, and
        setting aside what it cannot read (``queues.keyspace.quarantine``)."""
        die_with_parent(self.parent_pid)
        rqcompat.install_scheduler_signal_handlers(self)
        outage = OutageLog(self.log, f"RQ scheduler {self.name}")
        backoff = Backoff(self.retry_max)
        born = False
        while not rqcompat.scheduler_stop_requested(self):
            try:
                if not born:
                    self.register_birth()
                    born = True
                if self.should_reacquire_locks:
                    self.acquire_locks()
                self.heartbeat()
                self.move_due_jobs()
            except REDIS_ERRORS as exc:
                outage.failed(exc, "move due jobs to their queues")
                rqcompat.forget_scheduled_registries(self)
                sleep(backoff.next(), lambda: rqcompat.scheduler_stop_requested(self))
                continue
            except Exception as exc:  # noqa: BLE001 — an entry it cannot read: set aside or reported, never its end
                quarantine.settle(
                    self.connection,
                    self.expected_keys,
                    exc,
                    who=f"RQ scheduler {self.name}",
                    what="move due jobs to their queues",
                    log=self.log,
                )
                rqcompat.forget_scheduled_registries(self)
            outage.ok()
            backoff.reset()
            if os.getppid() != self.parent_pid:
                break  # the worker is gone (where the kernel could not tell us)
            # the interval's sleep, releasing rate-limited jobs as their tokens come (queues/producer/rates.py)
            rates.wait(self.connection, self.interval, lambda: rqcompat.scheduler_stop_requested(self))
        try:
            self.stop()
        except REDIS_ERRORS:
            pass  # the locks expire by themselves


class SchedulerKeeper:
    """A worker's RQ scheduler: started with the worker (rq's ``_start_scheduler`` with
    ``ResilientRQScheduler``), stopped with it, and restarted within seconds when a lock is free."""

    def __init__(self, worker, *, burst=False, logging_level="INFO", date_format=None, log_format=None):

        self.worker = worker
        self.burst = burst
        self.scheduler = ResilientRQScheduler(
            worker.queues,
            connection=worker.connection,
            logging_level=logging_level if logging_level is not None else worker.log.level,
            date_format=date_format or DEFAULT_LOGGING_DATE_FORMAT,
            log_format=log_format or DEFAULT_LOGGING_FORMAT,
            serializer=worker.serializer,
            lock_seconds=worker.resilience.scheduler_lock,
            retry_max=worker.resilience.redis_retry_max,
        )
        self.every = max(1.0, worker.resilience.scheduler_lock / 4)
        self._next_tick = 0.0

    def start(self):
        """Take the locks that are free; in burst mode move due jobs once, else start the process."""
        scheduler = self.scheduler
        scheduler.guarded(scheduler.acquire_locks, "take its locks")
        if scheduler.acquired_locks:
            if self.burst:
                try:
                    scheduler.register_birth()
                    scheduler.move_due_jobs()
                finally:
                    scheduler.release_locks()
                    scheduler.register_death()
            else:
                scheduler.start()
        return scheduler

    def tick(self):
        """Every couple of seconds: make sure some scheduler holds the locks of the worker's queues."""
        moment = time.monotonic()
        if moment < self._next_tick or self.burst or self.worker.stop.requested:
            return
        self._next_tick = moment + self.every
        process = rqcompat.scheduler_process(self.scheduler)
        if process is not None and process.is_alive():
            return
        try:  # starts a scheduler process if a lock was free
            self.scheduler.guarded(lambda: self.scheduler.acquire_locks(auto_start=True), "take its locks")
        except REDIS_ERRORS as exc:
            self.worker.outage.failed(exc, "check the scheduler lock")

    def stop(self):
        process = rqcompat.scheduler_process(self.scheduler)
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


def run_rq_scheduler(scheduler, *, retry_max=5.0, burst=False, log=logger):
    """``scheduler.run()`` (rq-scheduler) again and again until it ends normally or is stopped.

    rq-scheduler's ``run()`` registers, installs SIGTERM/SIGINT handlers that raise SystemExit, and
    leaves on the first Redis error. Each new run gets a new name: the old registration may still be
    there without its death (it expires by itself).
    """
    outage = OutageLog(log, "rq-scheduler")
    backoff = Backoff(retry_max)

    def exit_now(signum, frame):
        raise SystemExit(0)

    while True:
        started = time.monotonic()
        try:
            scheduler.run(burst=burst)
            return
        except REDIS_ERRORS as exc:
            outage.failed(exc, "run the periodic-job scheduler")
        except Exception as exc:  # noqa: BLE001 — an entry it cannot read: reported once, then run again
            quarantine.settle(
                scheduler.connection,
                scheduler.expected_keys,
                exc,
                who="rq-scheduler",
                what="run the periodic-job scheduler",
                log=log,
            )
            if burst:
                return
            sleep(rqcompat.periodic_interval(scheduler))
        if time.monotonic() - started > 60:
            backoff.reset()  # a new outage, not the same one
        # rq-scheduler's handlers talk to Redis: while it is away, a stop must just stop.
        signal.signal(signal.SIGTERM, exit_now)
        signal.signal(signal.SIGINT, exit_now)
        rqcompat.release_periodic_lock_flag(scheduler)
        scheduler.name = uuid.uuid4().hex
        wait_until_reachable(scheduler.connection, backoff, outage)
