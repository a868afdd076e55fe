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
holds its queues' locks, starting its own when the lock is free (``ResilienceMixin._tick``). So the
scheduler of a killed worker is replaced within about ``SCHEDULER_LOCK_SECONDS``.

``run_rq_scheduler`` does the same for ``manage.py rqscheduler`` (rq-scheduler, periodic jobs), whose
``run()`` exits on the first Redis error.
"""
import logging
import os
import signal
import time
import uuid
from datetime import datetime

from rq.scheduler import RQScheduler
from rq.scripts import ACQUIRE_OR_REFRESH_LOCK_SCRIPT, acquire_or_refresh_lock
from rq.utils import now, utcformat

from .liveness import die_with_parent
from .outage import REDIS_ERRORS, Backoff, OutageLog, sleep, wait_until_reachable

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
        if self._queue_names == self.acquired_locks:
            return False
        if not self.lock_acquisition_time:
            return True
        return (datetime.now() - self.lock_acquisition_time).total_seconds() > self.lock_seconds

    def acquire_locks(self, auto_start=False):
        """RQ's acquire_locks with a lock of ``lock_seconds``."""
        successful = set()
        for name in self._queue_names:
            outcome = acquire_or_refresh_lock(self.connection, self.get_locking_key(name), self.name,
                                              self.lock_seconds)
            if outcome == "acquired":
                self.log.info("Acquired scheduler lock for %s", name)
            if outcome in ("acquired", "refreshed"):
                successful.add(name)
        self._scheduled_job_registries = []
        self._acquired_locks = successful
        self.lock_acquisition_time = datetime.now()
        if self._acquired_locks and auto_start and (not self._process or not self._process.is_alive()):
            self.start()
        return successful

    def heartbeat(self):
        """RQ's heartbeat with a lock of ``lock_seconds``."""
        self.last_heartbeat = now()
        names = sorted(self._acquired_locks)
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
            self._acquired_locks -= lost
            self._scheduled_job_registries = []

    def work(self):
        """RQ's scheduler loop (in the forked child), waiting out Redis errors instead of dying."""
        die_with_parent(self.parent_pid)
        self._install_signal_handlers()
        outage = OutageLog(self.log, f"RQ scheduler {self.name}")
        backoff = Backoff(self.retry_max)
        born = False
        while not self._stop_requested:
            try:
                if not born:
                    self.register_birth()
                    born = True
                if self.should_reacquire_locks:
                    self.acquire_locks()
                self.heartbeat()
                self.enqueue_scheduled_jobs()
            except REDIS_ERRORS as exc:
                outage.failed(exc, "move due jobs to their queues")
                self._scheduled_job_registries = []
                sleep(backoff.next(), lambda: self._stop_requested)
                continue
            outage.ok()
            backoff.reset()
            if os.getppid() != self.parent_pid:
                break  # the worker is gone (where the kernel could not tell us)
            sleep(self.interval, lambda: self._stop_requested)
        try:
            self.stop()
        except REDIS_ERRORS:
            pass  # the locks expire by themselves


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
        if time.monotonic() - started > 60:
            backoff.reset()  # a new outage, not the same one
        # rq-scheduler's handlers talk to Redis: while it is away, a stop must just stop.
        signal.signal(signal.SIGTERM, exit_now)
        signal.signal(signal.SIGINT, exit_now)
        scheduler._lock_acquired = False
        scheduler.name = uuid.uuid4().hex
        wait_until_reachable(scheduler.connection, backoff, outage)
