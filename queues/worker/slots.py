"""The jobs a concurrent worker (``concurrent.py``) runs at once: one ``Slot`` per job, ``JobThreads``
its bounded pool of threads.

A slot is the per-job form of what rq keeps in single slots of a worker: the running job, its
execution, the stop-job mark, and who records its outcome. That last one is a small state machine,
so that the job's own thread and the worker (the end of the shutdown grace, a cold stop, an attempt
that overran its hard timeout) never both write the job's outcome:

    RUNNING --(its thread starts recording the outcome)--> FINISHING
    RUNNING --(the worker takes it back or fails it)-----> WITHDRAWN

Whoever moves the slot out of RUNNING owns the outcome; a thread whose slot was withdrawn stops
with ``Withdrawn`` the moment it returns from the job's code, having written nothing.

``JobThreads`` starts its threads (daemons: a job blocked in C code never holds the process) on
first use; each takes the next slot, runs it, and hands it to the main thread (``ended``), which
does the per-job housekeeping in one thread.
"""

import logging
import queue as stdqueue
import threading

RUNNING, FINISHING, WITHDRAWN = "running", "finishing", "withdrawn"

logger = logging.getLogger("rq.worker")


class Withdrawn(BaseException):
    """The worker took this job back (or failed it): its thread must record nothing."""


class Slot:
    def __init__(self, job, queue, execution):
        self.job = job
        self.queue = queue
        self.execution = execution
        self.state = RUNNING
        self.stopped = False  # rq's stop-job command named this job
        self.ident = None  # the thread running it
        self.coroutine = None  # an --async worker's: the job's coroutine while on the loop (eventloop.Awaiting)
        self.lock = threading.RLock()  # a signal handler of the main thread may claim it amid a claim

    def claim(self, state):
        """Move from RUNNING to ``state``; False when someone else did first."""
        with self.lock:
            if self.state != RUNNING:
                return False
            self.state = state
            return True


class JobThreads:
    """At most ``size`` jobs at once, each in a thread of its own running ``run(slot)``."""

    def __init__(self, size, run, who, log=logger):
        self.size = size
        self.run = run
        self.who = who
        self.log = log
        self.changed = threading.Condition()
        self.slots = {}  # job id -> Slot, from start until its thread is done with it
        self.inbox = stdqueue.SimpleQueue()
        self.done = stdqueue.SimpleQueue()
        self.local = threading.local()
        self.threads = []

    # -- in the main thread ---------------------------------------------------------------
    def hold(self, slot):
        """Count ``slot`` as taken (``free``, ``find``, ``active``) before its thread starts it (``start``)."""
        with self.changed:
            self.slots[slot.job.id] = slot

    def start(self, slot):
        with self.changed:
            self.slots[slot.job.id] = slot
        if not self.threads:
            for number in range(self.size):
                thread = threading.Thread(target=self._serve, name=f"optima-job-{number + 1}", daemon=True)
                thread.start()
                self.threads.append(thread)
        self.inbox.put(slot)

    def has_free(self):
        return self.free() > 0

    def free(self):
        """How many slots are free."""
        with self.changed:
            return max(0, self.size - len(self.slots))

    def active(self):
        """Slots whose outcome is still their thread's (RUNNING or FINISHING)."""
        with self.changed:
            return [slot for slot in self.slots.values() if slot.state != WITHDRAWN]

    def busy(self):
        """Whether any slot's outcome is still its thread's (``active()`` not empty), without listing them: asked
        several times a job by the main thread (its housekeeping), over up to ``size`` slots."""
        with self.changed:
            return any(slot.state != WITHDRAWN for slot in self.slots.values())

    def stuck(self):
        """Slots withdrawn whose thread has not come back (blocked in C code, or still unwinding)."""
        with self.changed:
            return [slot for slot in self.slots.values() if slot.state == WITHDRAWN]

    def wait(self, seconds):
        """Until a job ends (or ``seconds`` pass)."""
        with self.changed:
            self.changed.wait(seconds)

    def wait_free(self, seconds):
        """Until a slot is free (or ``seconds`` pass); no wake-up is missed: a job that ended between
        ``has_free`` and this call is seen under the lock."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.slots) < self.size, seconds)

    def ended(self):
        """The slots whose jobs ended since the last call (their outcome recorded by their thread)."""
        found = []
        while True:
            try:
                found.append(self.done.get_nowait())
            except stdqueue.Empty:
                return found

    def find(self, job_id=None, execution_id=None, ident=None):
        with self.changed:
            for slot in self.slots.values():
                if (
                    (job_id is not None and slot.job.id == job_id)
                    or (ident is not None and slot.ident == ident)
                    or (execution_id is not None and slot.execution is not None and slot.execution.id == execution_id)
                ):
                    return slot
        return None

    # -- in a job's thread ----------------------------------------------------------------
    def mine(self):
        """The slot this thread runs, or None (the main thread, the lifeline, the watchdog...)."""
        return getattr(self.local, "slot", None)

    def _serve(self):
        while True:
            slot = self.inbox.get()
            with slot.lock:
                slot.ident = threading.get_ident()
            self.local.slot = slot
            try:
                self.run(slot)
            except Withdrawn:
                pass
            except BaseException:  # noqa: BLE001 — one job's thread never ends the pool
                self.log.exception("%s: job %s ended its thread unexpectedly", self.who, slot.job.id)
            finally:
                self.local.slot = None
                with self.changed:
                    if self.slots.get(slot.job.id) is slot:
                        del self.slots[slot.job.id]
                    self.changed.notify_all()
                if slot.state != WITHDRAWN:
                    self.done.put(slot)
