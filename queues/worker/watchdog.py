"""The per-attempt timeout of a job that runs in a thread of a concurrent worker (``concurrent.py``).

rq enforces a job's timeout with SIGALRM (``UnixSignalDeathPenalty``), which only the main thread
can receive, and its ``TimerDeathPenalty`` starts a timer thread per attempt and patches the
exception class's ``__init__`` (shared by every attempt: two jobs with different timeouts would
read each other's message). Here one ``Watchdog`` thread per worker watches every attempt:

- at the timeout, it raises rq's ``JobTimeoutException`` into the job's thread
  (``PyThreadState_SetAsyncExc``, what rq's ``TimerDeathPenalty`` does): the job's Python code stops
  at its next bytecode, and the attempt fails as a timed-out one (retry, or dead letter ``timeout``);
- a thread blocked in C code (a ``time.sleep``, a socket read without a timeout, a C extension)
  only sees that exception when the call returns. ``HARD_TIMEOUT_MARGIN_SECONDS`` after the timeout
  (what a forking worker waits before it kills its horse) the watchdog gives up on it:
  ``on_wedged(penalty)`` records the attempt as failed and the worker stops (``concurrent.py``).

``raise_in_thread`` is also how rq's stop-job command reaches the one job it names.
"""

import ctypes
import logging
import threading
import time

from rq.timeouts import BaseDeathPenalty, JobTimeoutException

HARD_TIMEOUT_MARGIN_SECONDS = 60  # as the forking worker's supervision (supervision.HorseWatch)

logger = logging.getLogger("rq.worker")


def raise_in_thread(ident, exc_class):
    """Have ``exc_class`` raised in thread ``ident`` at its next bytecode. True when it was set."""
    found = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exc_class))
    if found > 1:  # cannot happen for a valid id; undo rather than hit several threads
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)
        return False
    return found == 1


def clear_in_thread(ident):
    """Withdraw an exception ``raise_in_thread`` set that the thread has not raised yet."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), None)


def timeout_error(seconds):
    """rq's JobTimeoutException with this attempt's message, as a class of its own (an exception
    raised into a thread can only be a class, instantiated without arguments)."""
    message = f"Task exceeded maximum timeout value ({seconds} seconds)"

    def __init__(self, *args):
        JobTimeoutException.__init__(self, message)

    return type("JobTimeoutException", (JobTimeoutException,), {"__init__": __init__, "__module__": "rq.timeouts"})


def time_out_in_thread(penalty):
    """What the watchdog does at an attempt's timeout: rq's JobTimeoutException raised into its thread."""
    raise_in_thread(penalty.ident, timeout_error(penalty.seconds))


class Watchdog(threading.Thread):
    """One thread that times every armed attempt of a worker. ``penalty_class`` is the
    ``death_penalty_class`` rq's ``perform_job`` and job callbacks use."""

    def __init__(self, on_wedged, who, margin=HARD_TIMEOUT_MARGIN_SECONDS, log=logger, on_timeout=None):
        super().__init__(name="optima-watchdog", daemon=True)
        self.on_wedged = on_wedged
        self.on_timeout = on_timeout or time_out_in_thread  # at the timeout (an --async worker cancels a coroutine)
        self.who = who
        self.margin = margin
        self.log = log
        self.lock = threading.Condition()
        self.armed = set()
        self.halted = False
        # When the watchdog wakes next (time.monotonic()), set under the lock as it starts waiting: an attempt armed
        # with a later deadline wakes nobody. Before, each arm woke the watchdog, which went over every armed attempt
        # under the lock the job threads arm and disarm with: at ``--async 500``, 500 attempts read a thousand times a
        # second, and a quarter of the job threads' samples waiting for that lock (py-spy, bench/async_jobs.py).
        self.next_wake = float("-inf")
        self.passes = 0  # its looks over the armed attempts (tests)
        watchdog = self

        class ThreadDeathPenalty(BaseDeathPenalty):
            def __init__(self, timeout, exception=JobTimeoutException, **kwargs):
                super().__init__(timeout, exception, **kwargs)
                self.seconds = timeout
                self.job_id = kwargs.get("job_id")
                self.ident = None
                self.deadline = None
                self.fired_at = None
                self.wedged = False

            def setup_death_penalty(self):
                if self.seconds and self.seconds > 0:
                    watchdog.arm(self)

            def cancel_death_penalty(self):
                watchdog.disarm(self)

        self.penalty_class = ThreadDeathPenalty

    def arm(self, penalty):
        penalty.ident = threading.get_ident()
        penalty.deadline = time.monotonic() + penalty.seconds
        with self.lock:
            self.armed.add(penalty)
            if penalty.deadline < self.next_wake:  # sooner than the watchdog looks again
                self.lock.notify()

    def disarm(self, penalty):
        with self.lock:
            if penalty in self.armed:
                self.armed.discard(penalty)
                if penalty.fired_at is not None:
                    clear_in_thread(penalty.ident)  # not raised yet: the attempt ended in time after all

    def halt(self):
        with self.lock:
            self.halted = True
            self.lock.notify()

    def run(self):
        while True:
            wedged = []
            with self.lock:
                if self.halted:
                    return
                self.passes += 1
                moment = time.monotonic()
                for penalty in self.armed:
                    if penalty.fired_at is None and moment >= penalty.deadline:
                        penalty.fired_at = moment
                        self.on_timeout(penalty)
                    elif (
                        penalty.fired_at is not None and not penalty.wedged and moment >= penalty.fired_at + self.margin
                    ):
                        penalty.wedged = True
                        wedged.append(penalty)
                waits = [
                    p.deadline if p.fired_at is None else p.fired_at + self.margin for p in self.armed if not p.wedged
                ]
                if not wedged:
                    wait = min([0.5] + [max(0.01, w - moment) for w in waits])
                    self.next_wake = moment + wait
                    self.lock.wait(wait)
                    self.next_wake = float("-inf")  # looking now: an arm meanwhile is seen by this pass
            for penalty in wedged:
                try:
                    self.on_wedged(penalty)
                except Exception:  # noqa: BLE001 — the watchdog must keep timing the other jobs
                    self.log.exception(
                        "%s: could not settle job %s, which overran its timeout", self.who, penalty.job_id
                    )
