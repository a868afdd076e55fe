"""The job a fork-free worker (``rqworker --no-fork``) runs in its own main thread.

``InProcessJob`` is what a forking worker's horse supervision does, for a job that has no horse:

- ``beat``: from the lifeline thread while the job runs (the main thread, busy with the job,
  cannot): keep the worker's registration alive, as a forking worker's monitoring loop does;
- ``arm_grace``: on a stop request while the job runs, a timer ends it when the grace runs out (armed
  by the lifeline thread, never in the signal handler);
- ``end``: a cold stop or the grace over: the job goes back to the head of its queue and the
  process exits. Nothing is raised into the job's code: a job cannot be stopped from outside its
  thread safely, so the process ends under it (after the job is safely back).
"""

import os
import threading
from contextlib import contextmanager

from rq.job import JobStatus

from queues.connection.outage import REDIS_ERRORS
from queues.worker import supervision


class InProcessJob:
    def __init__(self, worker):
        self.worker = worker
        self.current = None  # (job, queue, execution) while a job runs
        self._grace_timer = None
        self._arming = threading.Lock()

    @contextmanager
    def running(self, job, queue, execution):
        self.current = (job, queue, execution)
        if self.worker.stop.requested:
            self.arm_grace()
        try:
            yield
        finally:
            self.current = None

    def beat(self, connection):
        if self.current is not None:
            connection.expire(self.worker.key, self.worker.worker_ttl + 60)

    def arm_grace(self):
        """Start the grace timer once (the lifeline arms it on a stop signal, the main thread when a job
        starts after one: never a signal handler, which must not start a thread)."""
        with self._arming:
            if self._grace_timer is not None:
                return
            self._grace_timer = self._timer()
        self._grace_timer.start()

    def _timer(self):
        worker = self.worker

        def grace_over():
            if self.current is not None:
                worker.stop.interrupt(f"the shutdown grace period of {worker.stop.grace:g} s ran out")
                worker.log.warning("Worker %s: stopping: %s", worker.name, worker.stop.interrupted)
                self.end()

        timer = threading.Timer(worker.stop.grace, grace_over)
        timer.daemon = True
        return timer

    def end(self):
        running = self.current
        if running is None:
            return
        worker = self.worker
        job, queue, execution = running
        why = worker.stop.take_interrupted() or "its worker stopped"
        try:
            if job.get_status(refresh=True) == JobStatus.STARTED:  # not if it ended a moment ago
                supervision.return_to_queue(worker.connection, job, queue, execution, why)
                worker.log.warning(
                    "Worker %s: job %s back at the head of %s, attempt not counted: %s; exiting",
                    worker.name,
                    job.id,
                    queue.name,
                    why,
                )
        except REDIS_ERRORS:
            worker.log.error(
                "Worker %s: Redis unreachable; job %s stays registered as started and the other "
                "workers will re-run it once this one is gone",
                worker.name,
                job.id,
            )
        try:
            worker.lifeline.stop()
            worker.register_death()
        except Exception:  # noqa: BLE001 — exiting anyway
            pass
        os._exit(0)
