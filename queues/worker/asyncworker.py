"""``rqworker --async N``: up to N jobs at once in one fork-free process, the ``async def`` ones as
coroutines of one shared event loop.

``OptimaAsyncWorker`` is the concurrent worker (``concurrent.py``: a slot and a thread per running job,
the main thread keeping rq's loop and ``Intake``) with one ``asyncio`` event loop in a thread of its own
(``eventloop.py``). A job's thread runs the job's whole per-job path as under ``--concurrency`` (its
start, its success or ``failures/``, retries, dead letters, the hooks: metrics, tracing, batches, limit
keys); only the coroutine an ``async def`` job returns is handed to the loop (``queues/jobs/coroutines.py``,
instead of rq's ``asyncio.run`` per job), and the thread waits for its outcome, holding no GIL. So N
coroutines share one loop, and a plain (sync) job runs in its thread as under ``--concurrency``.

Per job, what differs from ``--concurrency`` (docs/decisions.md, "One event loop for --async"):

==============================  ================================================================
timeout                         the watchdog cancels the coroutine (``task.cancel()``: its
                                ``finally`` runs); its thread raises rq's JobTimeoutException once
                                the task ended: a timed-out attempt (retry, or dead letter
                                ``timeout``). A coroutine that swallows the cancel is failed
                                60 s later and the worker exits 1, as a thread blocked in C code
stop-job (panel, rq's command)  the coroutine is cancelled; failed as stopped, no retry
SIGTERM                         as ``--concurrency``; past the grace every job still running goes
                                back to the head of its band, attempt not counted, then its
                                coroutine is cancelled (its ``finally`` runs) before the exit
SIGKILL                         as ``--concurrency``: the abandoned-job scan re-runs them
==============================  ================================================================

Django's ORM refuses to run on an event loop (``SynchronousOnlyOperation``), as in any async code:
coroutine jobs use ``sync_to_async`` or ``a``-prefixed queryset methods (docs/operations.md).
"""

import concurrent.futures
import contextvars

from queues.jobs import coroutines
from queues.worker.concurrent import FINISHING_WAIT_SECONDS, OptimaConcurrentWorker
from queues.worker.eventloop import Awaiting, LoopThread
from queues.worker.watchdog import time_out_in_thread, timeout_error


class OptimaAsyncWorker(OptimaConcurrentWorker):
    """Up to ``concurrency`` jobs at once; their coroutines on one event loop (``rqworker --async N``)."""

    def __init__(self, *args, concurrency=1, **kwargs):  # worker
        super().__init__(*args, concurrency=concurrency, **kwargs)
        self.event_loop = LoopThread(f"Worker {self.name}")
        self.watchdog.on_timeout = self.time_out

    def bootstrap(self, *args, **kwargs):  # worker
        self.event_loop.start()
        super().bootstrap(*args, **kwargs)

    def teardown(self):  # worker
        try:
            super().teardown()
        finally:
            self.event_loop.stop()

    # -- in a job's thread ------------------------------------------------------------------
    def run_in_thread(self, slot):  # a job's thread
        with coroutines.running_with(self.await_on_loop):
            super().run_in_thread(slot)

    def await_on_loop(self, coro):  # a job's thread (inside rq's perform, under the job's timeout)
        """The coroutine's result, awaited on the worker's loop; what cancelled it, raised here."""
        slot = self.threads.mine()
        if slot is None:  # not a job's thread of this worker (the runner is installed only there)
            return coroutines.run_alone(coro)
        awaiting = Awaiting()
        try:
            with slot.lock:
                slot.coroutine = awaiting  # from now on a stop or a timeout cancels it (interrupt)
            self.event_loop.submit(awaiting, coro, contextvars.copy_context())
            return awaiting.future.result()
        except concurrent.futures.CancelledError:
            if awaiting.reason is not None:
                raise awaiting.reason() from None
            raise  # the coroutine cancelled itself: a failure like any other exception
        except BaseException:
            if not awaiting.future.done():  # raised into this thread as it handed the coroutine over
                self.event_loop.cancel(awaiting, None)
            raise
        finally:
            with slot.lock:
                slot.coroutine = None

    # -- stops, timeouts and the end of a grace, from the other threads ----------------------
    def interrupt(self, slot, exc_class):  # pubsub or watchdog thread
        with slot.lock:
            if slot.coroutine is not None:
                self.event_loop.cancel(slot.coroutine, exc_class)
                return
        super().interrupt(slot, exc_class)  # a sync job, or one not on the loop yet: raised into its thread

    def time_out(self, penalty):  # watchdog thread
        slot = self.threads.find(ident=penalty.ident)
        if slot is None:
            time_out_in_thread(penalty)
            return
        self.interrupt(slot, timeout_error(penalty.seconds))

    def give_back_all(self, why):  # worker
        """As ``--concurrency``; then the coroutines of the jobs given back are cancelled (their ``finally``
        runs) and waited for a few seconds before the process exits."""
        super().give_back_all(why)
        waiting = []
        for slot in self.threads.stuck():  # withdrawn: given back, their outcome no longer theirs
            with slot.lock:
                if slot.coroutine is not None:
                    self.event_loop.cancel(slot.coroutine, None)
                    waiting.append(slot.coroutine.future)
        if waiting:
            concurrent.futures.wait(waiting, timeout=FINISHING_WAIT_SECONDS)


__all__ = ["OptimaAsyncWorker"]
