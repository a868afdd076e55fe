"""One job in a forking worker's main process: watching its work horse and settling what it left.

rq 3.0's ``monitor_work_horse`` waits with SIGALRM, knows no grace period, dies on a Redis error
while heart-beating, and treats a horse that exited 0 as done whatever Redis says. Here:

- ``HorseWatch`` waits for the horse through a pidfd (no SIGALRM race with the worker's own signal
  handling), beats the job's heartbeat every ``job_monitoring_interval`` seconds (a Redis error
  there is logged by the worker and never ends the wait), ends the shutdown grace period by killing
  the horse, and keeps rq's safety net: a horse still running 60 s past its job's timeout is killed.
- ``verdict`` decides, from the job's status and started entry in Redis and the horse's exit, what
  must still happen to the job (a pure function: every case is tested in-process).
- ``return_to_queue`` puts a job that did not end back at the head of its queue, its attempt not
  counted (``jobmeta.mark_interrupted`` counts these returns).

A horse that exited 0 recorded its job's outcome itself (the horse exits with EX_TEMPFAIL when it
could not: ``horse.py``), so the common case costs the worker no Redis command at all.
"""

import enum
import os
import select
import time
from dataclasses import dataclass

from rq.job import JobStatus

from queues.jobs import meta as jobmeta
from queues.worker.horse import EX_TEMPFAIL


class Reaper:
    """Wait for a child to exit, at most ``timeout`` seconds at a time (pidfd: no signals)."""

    def __init__(self, pid):
        self.pid = pid
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, timeout):
        """(pid, wait status or None when reaped elsewhere, rusage), or None if still running."""
        if self.fd is not None:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            return self._reap(blocking=True) if ready else None
        deadline = time.monotonic() + timeout
        while True:
            result = self._reap(blocking=False)
            if result is not None or time.monotonic() >= deadline:
                return result
            time.sleep(0.01)

    def _reap(self, blocking):
        try:
            pid, status, rusage = os.wait4(self.pid, 0 if blocking else os.WNOHANG)
        except ChildProcessError:
            return self.pid, None, None  # reaped elsewhere: outcome unknown, settled from Redis
        return (pid, status, rusage) if pid else None

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class HorseWatch:
    """Wait for one work horse. ``stop`` is the worker's StopState; ``kill()`` ends the horse;
    ``beat()`` renews the job's heartbeat; ``tick()`` runs the worker's periodic duties."""

    def __init__(self, pid, *, stop, kill, beat, tick, beat_interval, job_timeout, log, worker_name, job_id):
        self.reaper = Reaper(pid)
        self.stop = stop
        self.kill = kill
        self.beat = beat
        self.tick = tick
        self.beat_interval = beat_interval
        self.job_timeout = job_timeout
        self.log = log
        self.worker_name = worker_name
        self.job_id = job_id

    def wait(self, poll=1.0):
        started = time.monotonic()
        next_beat = started + self.beat_interval
        overran = False
        try:
            while True:
                result = self.reaper.wait(poll)
                if result is not None:
                    return result
                moment = time.monotonic()
                if self.stop.interrupted is None and self.stop.grace_over():
                    self.stop.interrupt(f"the shutdown grace period of {self.stop.grace:g} s ran out")
                    self.log.warning(
                        "Worker %s: stopping job %s: %s", self.worker_name, self.job_id, self.stop.interrupted
                    )
                    self.kill()
                    continue
                if (
                    not overran
                    and self.job_timeout
                    and self.job_timeout > 0
                    and moment - started > self.job_timeout + 60
                ):
                    overran = True  # the horse's own timeout did not fire: rq's safety net
                    self.log.warning(
                        "Worker %s: job %s overran its timeout by 60 s; killing its horse",
                        self.worker_name,
                        self.job_id,
                    )
                    self.kill()
                    continue
                if moment >= next_beat:
                    next_beat = moment + self.beat_interval
                    self.beat()
                self.tick()
        finally:
            self.reaper.close()


class Action(enum.Enum):
    """What the worker must still do for a job after its horse ended."""

    REQUEUE = "requeue"  # back to the head of its queue, its attempt not counted
    FAIL = "fail"  # the horse died mid-job: the attempt failed (retry or dead letter)
    STOPPED = "stopped"  # rq's stop-job command ended it: failed, never retried
    FORGET = "forget"  # it ended: only its execution record is left to drop
    NONE = "none"  # nothing left to do


@dataclass(frozen=True)
class Verdict:
    action: Action
    why: str = ""


def exit_code(wait_status):
    """The exit code of a horse that exited, else None (killed by a signal, or reaped elsewhere)."""
    if wait_status is not None and os.WIFEXITED(wait_status):
        return os.WEXITSTATUS(wait_status)
    return None


def failure_text(wait_status):
    how = f" (signal {os.WTERMSIG(wait_status)})" if wait_status is not None and os.WIFSIGNALED(wait_status) else ""
    return f"Work-horse terminated unexpectedly; waitpid returned {wait_status}{how}; "


def verdict(*, status, registered, wait_status, interrupted, stopped):
    """What the worker must still do for a job after its horse ended.

    ``status``: the job's status in Redis; ``registered``: its started entry is still there;
    ``wait_status``: the horse's wait status (None: reaped elsewhere); ``interrupted``: why the
    worker ended the horse on purpose (or None); ``stopped``: rq's stop-job command named this job.
    """
    code = exit_code(wait_status)
    if registered and status == JobStatus.QUEUED:
        return Verdict(Action.REQUEUE, interrupted or "its work horse ended before starting it")
    if interrupted:
        if status == JobStatus.STARTED:
            return Verdict(Action.REQUEUE, interrupted)
    elif wait_status is None or code in (0, EX_TEMPFAIL):
        if registered and status == JobStatus.STARTED:
            return Verdict(
                Action.REQUEUE,
                "its work horse could not reach Redis to record the outcome"
                if code == EX_TEMPFAIL
                else "its outcome was not recorded",
            )
    elif stopped:
        return Verdict(Action.STOPPED)
    elif status == JobStatus.STARTED:
        return Verdict(Action.FAIL, failure_text(wait_status))
    return Verdict(Action.FORGET if registered else Action.NONE)


def return_to_queue(connection, job, queue, execution, why):
    """Put a job that did not end back at the head of its queue; its attempt is not counted."""
    job.get_meta(refresh=True)
    jobmeta.mark_interrupted(job.meta, why)
    with connection.pipeline() as pipe:
        if execution is not None:
            execution.delete(job=job, pipeline=pipe)
        job.set_status(JobStatus.QUEUED, pipeline=pipe)
        pipe.hset(job.key, "meta", job.serializer.dumps(job.meta))
        if connection.lpos(queue.key, job.id) is None:
            pipe.lpush(queue.key, job.id)
        pipe.execute()


def forget(connection, job, execution):
    """Drop the execution record of a job that ended (or vanished) without its horse doing it."""
    with connection.pipeline() as pipe:
        execution.delete(job=job, pipeline=pipe)
        pipe.execute()
