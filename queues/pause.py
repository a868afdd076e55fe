"""Per-queue pause: a flag in Redis that workers honour (the jobs stay in the queue).

Key: ``<prefix>:optima:paused`` — a Redis set of paused queue names (one key, so workers,
the panel and /metrics read every queue's state in one command).
"""
import math
import time

import redis
from rq.intermediate_queue import IntermediateQueue
from rq.utils import as_text

from . import conf
from .registry import get_config


def paused_key():
    return conf.app_key("paused")


def pause(name, connection=None):
    get_config(name)
    _conn(connection).sadd(paused_key(), name)


def resume(name, connection=None):
    get_config(name)
    _conn(connection).srem(paused_key(), name)


def paused_names(connection=None):
    return {as_text(n) for n in _conn(connection).smembers(paused_key())}


def is_paused(name, connection=None):
    return bool(_conn(connection).sismember(paused_key(), name))


def _conn(connection):
    if connection is not None:
        return connection
    from .connection import get_connection

    return get_connection()


class PauseMixin:
    """Worker side of pause: dequeue only from the worker's queues that are not paused.

    Before each wait the worker reads the paused set (one SMEMBERS) and listens on the other
    queues only; when all of its queues are paused it idles (heartbeats and maintenance continue,
    signals are honoured). While something is paused it waits in slices of ``pause_poll_seconds`` so that a
    resume is seen within that time; with nothing paused it blocks as long as RQ would. A queue
    paused while the worker was already blocked on it can still hand over one job: that job is
    pushed back to the head of its queue, untouched, and the worker moves on.
    """

    pause_poll_seconds = 1  # seconds between re-reads of the paused set while something is paused

    def released_job(self, job):
        """Hook: a dequeued job was handed back to its queue, so none is in hand any more. No-op here;
        the resilience mixin overrides it (a stop request may then end the worker at once)."""

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        deadline = None if max_idle_time is None else time.monotonic() + max_idle_time
        own_queues = self._ordered_queues
        seen = None
        while True:
            try:
                paused = paused_names(self.connection)
            except (redis.ConnectionError, redis.TimeoutError):
                paused = seen or set()  # the dequeue below waits for Redis the way RQ does
            mine = {q.name for q in own_queues} & paused
            if mine != seen:
                if mine:
                    self.log.info("Worker %s: paused queues left alone: %s", self.name, ", ".join(sorted(mine)))
                elif seen:
                    self.log.info("Worker %s: no paused queue any more", self.name)
                seen = mine
            active = [q for q in own_queues if q.name not in mine]
            if timeout is None:  # burst: whatever is not paused, once
                if not active:
                    return None
                return self._dequeue_from(active, own_queues, None, max_idle_time)
            if deadline is not None and time.monotonic() >= deadline:
                return None
            wait = timeout if not mine else min(timeout, self.pause_poll_seconds)
            if deadline is not None:
                wait = max(1, min(wait, math.ceil(deadline - time.monotonic())))
            if not active:
                self.heartbeat()
                if self.should_run_maintenance_tasks:
                    self.run_maintenance_tasks()  # registries, abandoned jobs: due even while idle
                self.procline("All queues paused: " + ", ".join(sorted(mine)))
                time.sleep(wait)
                continue
            result = self._dequeue_from(active, own_queues, wait, wait)
            if result is None:
                continue
            job, queue = result
            if queue.name in mine or self._paused_meanwhile(queue.name):
                self._put_back(job, queue)
                self.released_job(job)
                continue
            return result

    def _paused_meanwhile(self, name):
        try:
            return is_paused(name, self.connection)
        except (redis.ConnectionError, redis.TimeoutError):
            return False  # Redis just went away: run the job rather than strand it

    def _dequeue_from(self, active, own_queues, timeout, max_idle_time):
        self._ordered_queues = active
        try:
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        finally:
            self._ordered_queues = own_queues

    def _put_back(self, job, queue):
        """Return a job popped from a queue that was paused meanwhile to the head of that queue."""
        with self.connection.pipeline() as pipe:
            pipe.lrem(IntermediateQueue(queue.key, self.connection).key, 1, job.id)
            pipe.lpush(queue.key, job.id)
            pipe.execute()
        self.log.info("Worker %s: queue %s was paused meanwhile; job %s put back", self.name, queue.name, job.id)
