"""The stop state of one worker: asked to stop, the grace period, a cold stop.

A plain object, written only by the worker's signal handlers and its main loop (one thread), read
by the dequeue and the supervision of a job. rq's own flag (``_stop_requested``, which its work loop
reads) is set through ``queues.rqcompat``.

- ``request(running)``: first SIGTERM/SIGINT. No new job is taken; a running job may finish within
  ``grace`` seconds (the deadline starts now, or when a job that was starting has started).
- ``request_cold()``: second signal. The running job goes back to its queue now.
- ``interrupt(why)`` / ``take_interrupted()``: the worker ended the running job on purpose (grace
  over, cold stop); the settlement puts it back to its queue with its attempt not counted.
- A long job (issue 34) hears of the stop at its next checkpoint and pauses (``queues/jobs/resume.py``):
  a worker that runs jobs itself registers ``requested`` there; a forking worker's first signal sends its
  horse a SIGTERM (``signal_horse``), which the horse notes and otherwise ignores.

``first_signal`` and ``second_signal`` are what the worker's signal handlers do with it.

A handler runs in the main thread between two of its bytecodes: maybe while that thread holds a lock
(a log handler's, a stream's, a Redis connection's) or waits on a Redis that is away. So the first
signal only sets flags and sends the RQ scheduler its SIGTERM; its log line and the
``shutdown_requested_date`` it writes are errands of the worker's lifeline thread
(``liveness.Lifeline.errand``), and the scheduler is waited for in the teardown, not in the handler (it
was: up to 12 s with a scheduler that did not answer). A second signal ends things now: it may write
to Redis (the running job goes back to its queue) and log.
"""

import os
import signal
import time

from rq.utils import now, utcformat
from rq.worker.base import signal_name

from queues import rqcompat


class StopState:
    def __init__(self, grace, clock=time.monotonic):
        self.grace = float(grace)
        self.clock = clock
        self.requested = False
        self.cold = False
        self.grace_deadline = None
        self._interrupted = None
        self._requested_at = None

    def request(self, running):
        """A first stop signal (``running``: a job is running, so its grace period starts now)."""
        self.requested = True
        self._requested_at = self.clock()
        if running:
            self.start_grace()

    def repeated(self):
        """True when a further signal is the same stop delivered twice within a second."""
        return self._requested_at is not None and self.clock() - self._requested_at < 1.0

    def start_grace(self):
        if self.grace_deadline is None:
            self.grace_deadline = self.clock() + self.grace

    def grace_over(self):
        """Past the grace period of a stop request (starting it if the job was still starting)."""
        if not self.requested:
            return False
        self.start_grace()
        return self.clock() >= self.grace_deadline

    def request_cold(self, why):
        self.cold = True
        self.interrupt(why)

    def interrupt(self, why):
        if self._interrupted is None:
            self._interrupted = why

    @property
    def interrupted(self):
        return self._interrupted

    def take_interrupted(self):
        why, self._interrupted = self._interrupted, None
        return why

    def settle_deadline(self):
        """Seconds from now a stopping worker still waits for Redis to settle a job (None: no limit)."""
        if self.cold:
            return 5.0
        if self.requested:
            return max(5.0, self.grace)
        return None


def first_signal(worker, signum):
    """First SIGTERM/SIGINT: take no new job; the running one may finish within the grace period.
    Never raises (rq raises StopRequested when idle, which could strand a popped job), never blocks:
    no lock, no log line, no Redis command here (see the module docstring); the next signal is
    ``worker.request_force_stop``."""
    running = worker.job_running()
    worker.stop.request(running)
    when = now()
    rqcompat.request_stop(worker, when)
    signal.signal(signal.SIGINT, worker.request_force_stop)
    signal.signal(signal.SIGTERM, worker.request_force_stop)
    name, grace = worker.name, worker.stop.grace
    if running:

        def announce(connection):
            worker.log.warning(
                "Worker %s: %s: taking no new job; the running one may finish within %g s, then it goes back "
                "to its queue (a second signal does that now)",
                name,
                signal_name(signum),
                grace,
            )
            connection.hset(worker.key, "shutdown_requested_date", utcformat(when))

    else:

        def announce(connection):
            worker.log.warning("Worker %s: %s: stopping", name, signal_name(signum))

    errand(worker, announce)
    signal_scheduler(worker)
    if running:
        signal_horse(worker)


def signal_horse(worker):
    """SIGTERM to the worker's work horse, if it has one: the horse ignores it but notes the stop, so a long
    job pauses at its next checkpoint (``queues/jobs/resume.py``) instead of running out the grace."""
    pid = 0 if worker.runs_jobs_in_process else rqcompat.horse_pid(worker)
    if not pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        pass


def errand(worker, fn):
    """``fn(connection)`` run by the worker's lifeline thread (at once, in this thread, before it has one)."""
    lifeline = getattr(worker, "lifeline", None)
    if lifeline is None:
        fn(worker.connection)
    else:
        lifeline.errand(fn)


def signal_scheduler(worker):
    """SIGTERM to the worker's RQ scheduler process, if it runs one; the teardown waits for it."""
    keeper = getattr(worker.housekeeping, "schedulers", None)
    process = rqcompat.scheduler_process(keeper.scheduler) if keeper is not None else None
    if process is None or not process.pid:
        return
    try:
        os.kill(process.pid, signal.SIGTERM)
    except OSError:
        pass


def second_signal(worker, signum):
    """Second signal: the running job goes back to its queue now; then the worker exits 0."""
    if worker.stop.repeated():
        return  # the same stop, delivered twice (e.g. by a pool and by the terminal)
    if worker.job_running():
        worker.log.warning(
            "Worker %s: %s again: stopping the running job now; it goes back to its queue",
            worker.name,
            signal_name(signum),
        )
        worker.stop.request_cold("its worker received a second stop signal")
        worker.end_running_job()
        return
    worker.log.warning("Worker %s: %s again: exiting now", worker.name, signal_name(signum))
    raise SystemExit(0)
