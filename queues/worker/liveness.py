"""A worker's proof of life, and the processes that must not outlive their worker.

``Lifeline`` is a daemon thread of the worker's main process (never of its work horse: a fork keeps
only the forking thread). Every ``LIVENESS_INTERVAL_SECONDS`` it sets ``<p>:optima:alive:<worker>``
to expire after ``LIVENESS_TTL_SECONDS``, on a Redis client of its own (short timeouts, its own
pool: nothing it does can block, or be blocked by, the worker's BLMOVE or a fork). Then, once Redis
has answered for ``LIVENESS_TTL + LIVENESS_INTERVAL`` seconds in a row — time for every live worker
to have beaten again after an outage — it offers to run the abandoned-job scan (``abandoned.py``).

A thread, not the main loop, because the main loop may be blocked for a long time in places it
does not control (a job of several minutes, a slow callback), and liveness must not depend on them.

It also runs the worker's *errands*: what a signal handler must not do itself (``errand(fn)``,
``fn(connection)``): log a line, write to Redis. A handler runs in the main thread between two of its
bytecodes, maybe while that thread holds a lock the handler would need (a log handler's, a stream's, a
connection's) or waits on a Redis that is away; an errand only goes into a ``SimpleQueue`` (made to be
fed from a signal handler) and the lifeline wakes at once to run it, in its own thread, on its own
client (issue 32: a worker that did not stop).

The processes that must not outlive their worker die with it: ``kernel.die_with_parent``.
"""

import logging
import os
import queue
import socket
import threading
import time

from django.db import connections

from queues.connection.factory import copy_client
from queues.connection.outage import REDIS_ERRORS, OutageLog
from queues.keyspace import keys
from queues.worker import abandoned

logger = logging.getLogger("queues.resilience")


class Lifeline(threading.Thread):
    def __init__(self, worker_name, connection, options, queue_names, log=logger):
        super().__init__(name="optima-lifeline", daemon=True)
        self.worker_name = worker_name
        self.on_beat = None  # callable(connection) run after each beat (the fork-free worker's job heartbeat)
        self.connection = copy_client(connection, timeout=min(2.0, options.liveness_ttl / 3))
        self.options = options
        self.queue_names = queue_names  # callable -> names to scan
        self.log = log
        self.outage = OutageLog(log, f"Worker {worker_name} (liveness)")
        self.value = f"{socket.gethostname()}:{os.getpid()}"
        # A plain flag, not an Event: ``stop`` may run in a signal handler (a cold stop) amid a ``stop`` of
        # the main thread, and Event.set takes a lock that is not reentrant.
        self._halted = False
        self._errands = queue.SimpleQueue()  # callables(connection), fed by signal handlers
        self._healthy_since = None
        self._next_scan = 0.0
        self.scans = 0

    def beat(self):
        self.connection.set(keys.alive_key(self.worker_name), self.value, ex=int(self.options.liveness_ttl))
        if self.on_beat is not None:
            self.on_beat(self.connection)
        if self._healthy_since is None:
            self._healthy_since = time.monotonic()

    def errand(self, fn):
        """Have ``fn(connection)`` run by this thread soon (safe in a signal handler: one ``put``)."""
        self._errands.put(fn)

    def run_errands(self):
        """The errands waiting (the lifeline's own loop, or whoever stops it): each once, none raising."""
        while True:
            try:
                fn = self._errands.get_nowait()
            except queue.Empty:
                return
            self._run_errand(fn)

    def _run_errand(self, fn):
        if fn is None:
            return  # a wake-up (``stop``)
        try:
            fn(self.connection)
        except REDIS_ERRORS as exc:
            self.outage.failed(exc, "run an errand of its worker")
        except Exception:  # noqa: BLE001 — the lifeline must not die
            self.log.exception("Worker %s: an errand of the lifeline failed", self.worker_name)

    def _wait(self, until):
        """Until ``until`` (monotonic) or halted, running the errands that come meanwhile; True: halted."""
        while not self._halted:
            left = until - time.monotonic()
            if left <= 0:
                return False
            try:
                fn = self._errands.get(timeout=left)
            except queue.Empty:
                continue
            self._run_errand(fn)
        return True

    def run(self):
        while not self._wait(time.monotonic() + self.options.liveness_interval):
            try:
                self.beat()
            except REDIS_ERRORS as exc:
                self._healthy_since = None
                self.outage.failed(exc, "renew its liveness key")
                continue
            except Exception:  # noqa: BLE001 — the lifeline must not die
                self.log.exception("Worker %s: liveness beat failed", self.worker_name)
                continue
            self.outage.ok()
            now = time.monotonic()
            if now - self._healthy_since < self.options.recovery_grace or now < self._next_scan:
                continue
            self._next_scan = now + self.options.abandoned_scan
            self.scan()

    def scan(self):

        try:
            abandoned.scan_if_due(
                self.connection,
                self.queue_names(),
                interval=self.options.abandoned_scan,
                stale_after=self.options.liveness_ttl,
                log=self.log,
            )
            self.scans += 1
        except REDIS_ERRORS as exc:
            self._healthy_since = None
            self.outage.failed(exc, "scan for abandoned jobs")
        except Exception:  # noqa: BLE001 — a bad job must not stop the scans of the others
            self.log.exception("Worker %s: abandoned-job scan failed", self.worker_name)
        finally:
            connections.close_all()  # this thread's own database connections

    def stop(self, timeout=5.0):
        """Stop beating and withdraw the alive key (a stopped worker is dead at once)."""
        self._halted = True
        self._errands.put(None)  # wakes the thread now
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
        if not self.is_alive():
            self.run_errands()  # what a signal asked for just before the end: said before the worker exits
        try:
            self.connection.delete(keys.alive_key(self.worker_name))
        except REDIS_ERRORS:
            pass
        self.connection.close()
