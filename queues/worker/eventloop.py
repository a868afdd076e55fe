"""The one asyncio event loop of an ``rqworker --async N`` worker (``asyncworker.py``), in a thread of its own.

A job's thread hands the coroutine its ``async def`` function returned to the loop (``LoopThread.submit``)
and waits on an ``Awaiting``: a ``concurrent.futures.Future`` the loop settles with the task's outcome. The
task runs in a copy of the thread's context (``contextvars``), so rq's current job and the attempt's span
are what the coroutine sees, as under ``asyncio.run``.

A cancel (a timeout, rq's stop-job, the end of a shutdown grace) is ``task.cancel()`` on the loop, with the
reason kept on the ``Awaiting``: the job's thread raises it (a timeout's ``JobTimeoutException``,
``JobStopped``) once the task has ended, so the coroutine's ``finally`` blocks have run by then. A
coroutine that swallows the cancel and goes on is the thread blocked in C code of the concurrent worker:
the watchdog's hard margin fails its attempt (``concurrent.OptimaConcurrentWorker.wedged``).
"""

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import Coroutine
from typing import Any

logger = logging.getLogger("rq.worker")


class Awaiting:
    """One job's coroutine on the loop: its task once the loop started it, and why it was cancelled."""

    def __init__(self) -> None:
        self.future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.task: asyncio.Task[Any] | None = None
        self.cancelled = False
        self.reason: type[BaseException] | None = None  # what the job's thread raises for a cancel of ours


class LoopThread:
    """An event loop running forever in a daemon thread (a job stuck in it never holds the process)."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="optima-event-loop", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        except BaseException:  # noqa: BLE001 — logged; the worker's threads then see their futures never settle
            logger.exception("%s: its event loop ended unexpectedly", self.who)

    # -- from any thread ----------------------------------------------------------------------
    def submit(self, awaiting: Awaiting, coro: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        """Run ``coro`` on the loop in ``context``; ``awaiting.future`` gets its outcome."""
        self.loop.call_soon_threadsafe(self._start, awaiting, coro, context)

    def cancel(self, awaiting: Awaiting, reason: type[BaseException] | None) -> None:
        """Cancel the coroutine (before or after it started); its thread raises ``reason`` (None: CancelledError)."""
        if awaiting.cancelled:
            return
        awaiting.reason = reason
        awaiting.cancelled = True
        self.loop.call_soon_threadsafe(self._cancel, awaiting)

    # -- on the loop --------------------------------------------------------------------------
    def _start(self, awaiting: Awaiting, coro: Coroutine[Any, Any, Any], context: contextvars.Context) -> None:
        if awaiting.cancelled:  # cancelled on its way here: never started
            coro.close()
            awaiting.future.cancel()
            return
        task = self.loop.create_task(coro, context=context)
        awaiting.task = task
        task.add_done_callback(lambda done: _settle(done, awaiting.future))

    def _cancel(self, awaiting: Awaiting) -> None:
        if awaiting.task is not None:
            awaiting.task.cancel()


def _settle(task: "asyncio.Task[Any]", future: "concurrent.futures.Future[Any]") -> None:
    if task.cancelled():
        future.cancel()
        return
    error = task.exception()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(task.result())
