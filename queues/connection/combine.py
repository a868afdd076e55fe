"""The round trips of several threads sent as one: a group commit on a client's connection pool (issue 36).

A worker with many jobs in flight (``rqworker --concurrency N``, ``--async N``) writes each job's start and
its success from the job's own thread, a round trip each. Redis pays for each round trip a read, a write and
a wake-up, and the worker a send, a receive, the pool's checks and a thread's wake-up, whatever the round trip
carries: at a thousand jobs a second, a large share of the worker's CPU (``--async 500``: 1.34 ms of CPU a job
before, 0.95 after, bench/README.md). Here a thread that has a batch to send (its start's
script call, its success's MULTI: ``connection/batch.py``) sends it at once when no other batch is on its
way; otherwise it waits, and the thread whose batch was on its way, or the first one waiting, sends every
batch that queued up meanwhile in one write, reads their replies in order and hands each its own. Each batch
stays what it was: one script call or one MULTI ... EXEC, atomic on its own, and its caller gets its own
replies or its own error, exactly as from its own round trip. A lone thread waits for nobody: a batch is
never held back to gather others (the way PostgreSQL's commit_delay would), so a worker with one job at a
time sends as before. This is the leader/follower group commit of databases' write-ahead logs, and the
``flat combining`` of concurrent data structures; redis-py has no such thing (its pipelines are one
caller's), so it is written here.

A failure of the connection (a reset, a timeout) fails the batch being read and every one after it in that
write: each caller gets the error its own round trip would have raised, and handles it as it did (the
success's retry through an outage is idempotent, ``worker/horse.py``; the start checks whether it landed,
``worker/attempt.py``).
"""

import threading
from collections.abc import Callable
from typing import Any

import redis

from queues.connection import wire

_combiners: dict[int, "Combiner"] = {}  # id(client) -> its Combiner


def enable(client: redis.Redis) -> "Combiner":
    """Combine the batches sent on ``client`` from now on (idempotent) -> its combiner."""
    combiner = of(client)
    if combiner is None:
        combiner = _combiners[id(client)] = Combiner(client)
    return combiner


def disable(client: redis.Redis) -> None:
    _combiners.pop(id(client), None)


def of(client: redis.Redis) -> "Combiner | None":
    """The combiner of ``client``, or None when its batches go one by one."""
    combiner = _combiners.get(id(client))
    return combiner if combiner is not None and combiner.client is client else None


class _Request:
    __slots__ = ("commands", "read", "ready", "done", "answered", "value", "error", "batch")

    def __init__(self, commands: list[tuple[Any, ...]], read: Callable[[Any], Any]) -> None:
        self.commands = commands
        self.read = read
        self.ready = threading.Lock()  # held until the request is done or its thread is to send (a semaphore)
        self.ready.acquire()
        self.done = False
        self.answered = False  # its value or error is set (a nil reply is a value too)
        self.value: Any = None
        self.error: BaseException | None = None
        self.batch: list[_Request] = []  # the batches its thread sends, when handed the sending

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class Combiner:
    """Batches of commands sent on ``client``'s pool, several threads' in one round trip (see the module)."""

    # Round trips on their way at once, each on a connection of its own: 2 and 4 measured no faster than 1 at
    # ``--async 500`` (bench/async_jobs.py: the worker is then bound by its CPU, not by the wait for Redis)
    in_flight = 1

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._sending = 0
        self.round_trips = 0  # what it saved is told by these two (tests, benchmarks)
        self.batches = 0

    def run(self, commands: list[tuple[Any, ...]], read: Callable[[Any], Any]) -> Any:
        """Send ``commands`` (tuples of arguments) and return ``read(connection)``: the caller's reading of their
        replies, exactly as many as they are (a ``redis.ResponseError`` it raises is this batch's alone; anything
        else it raises leaves the connection out of step and fails the batches after it)."""
        request = _Request(commands, read)
        with self._lock:
            if self._sending < self.in_flight:
                self._sending += 1
                batch, self._pending = [*self._pending, request], []
            else:
                self._pending.append(request)
                batch = None
        if batch is None:
            request.ready.acquire()  # until done, or handed the sending of what queued up behind it
            if request.done:
                return request.outcome()
            batch = request.batch
        self._send_all(batch)
        return request.outcome()

    def _send_all(self, batch: list[_Request]) -> None:
        try:
            self._send(batch)
        except BaseException as exc:  # noqa: BLE001 — not a batch left without an answer
            for request in batch:
                if not request.answered:
                    request.error, request.answered = exc, True
            raise
        finally:
            with self._lock:
                following = self._pending[0] if self._pending else None
                if following is None:
                    self._sending -= 1
                else:  # its thread sends what queued up meanwhile
                    following.batch, self._pending = self._pending, []
            for request in batch:
                request.done = True
                request.ready.release()
            if following is not None:
                following.ready.release()

    def _send(self, batch: list[_Request]) -> None:
        self.round_trips += 1
        self.batches += len(batch)
        pool = self.client.connection_pool
        try:
            conn = pool.get_connection()  # connects when the pool has none: Redis away fails here
        except BaseException as exc:  # noqa: BLE001 — every batch gets it, as its own round trip would have raised it
            for request in batch:
                request.error, request.answered = exc, True
            return
        broken: BaseException | None = None
        try:
            conn.send_packed_command(wire.pack(conn, [command for request in batch for command in request.commands]))
        except BaseException as exc:  # noqa: BLE001 — every batch of this write gets it, below
            broken = exc
        try:
            for request in batch:
                if broken is not None:
                    request.error, request.answered = broken, True
                    continue
                try:
                    request.value = request.read(conn)
                except redis.ResponseError as exc:  # its own replies read: the next ones are in step
                    request.error = exc
                except BaseException as exc:  # noqa: BLE001 — out of step: this one and the rest fail with it
                    broken = request.error = exc
                request.answered = True
        finally:
            if broken is not None:
                conn.disconnect()
            pool.release(conn)
