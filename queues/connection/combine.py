"""The round trips of several threads sent as one: a group commit on a client's connection pool (issue 36).

A worker with many jobs in flight (``rqworker --concurrency N``, ``--async N``) writes each job's start and its
success from the job's own thread, a round trip each. Redis pays for each round trip a read, a write and a wake-up,
and the worker a send, a receive, the pool's checks and a thread's wake-up, whatever the round trip carries: at a
thousand jobs a second, a large share of the worker's CPU (``--async 500``: 1.34 ms of CPU a job before, 0.95 after,
bench/README.md). Here a thread that has a batch to send (its start's script call, its success's MULTI:
``connection/batch.py``; the main thread's pop: ``worker/dequeue.py``) sends it at once when no other batch is on
its way; otherwise it waits, and the thread whose batch was on its way, or the first one waiting, sends every batch
that queued up meanwhile in one write, reads their replies in order and hands each its own. Each batch stays what it
was: one script call or one MULTI ... EXEC, atomic on its own, and its caller gets its own replies or its own error,
exactly as from its own round trip. A lone thread waits for nobody: a batch is never held back to gather others (the
way PostgreSQL's commit_delay would), so a worker with one job at a time sends as before. This is the
leader/follower group commit of databases' write-ahead logs, and the ``flat combining`` of concurrent data
structures; redis-py has no such thing (its pipelines are one caller's), so it is written here.

Transactions that go in one write go as one (``run(..., transaction=True)``: the successes' MULTI ... EXEC,
``batch.execute_multi``): one MULTI, their commands one after the other, one EXEC, whose replies are split back
among their callers. Each job's writes stay atomic (inside a larger whole: no other client's command comes
between them either), and a command that fails when run (WRONGTYPE on a planted key) fails alone in its caller's
replies, as in its own EXEC. A command Redis refuses when queued (EXECABORT: nothing of the transaction applied)
sends each of its transactions again on its own, after the write's other replies are read, so that only the
refused one's caller gets the refusal. What it saves: the MULTI and the EXEC of every transaction but one (two
commands, and the server's transaction overhead, a job: ``--concurrency 8`` no-op jobs, 20.6 -> ~19 commands a
job, bench/redis_cost.py, issue 36).

A failure of the connection (a reset, a timeout) fails the batch being read and every one after it in that
write: each caller gets the error its own round trip would have raised, and handles it as it did (the
success's retry through an outage is idempotent, ``worker/horse.py``; the start checks whether it landed,
``worker/attempt.py``).
"""

import threading
from collections.abc import Callable
from typing import Any

import redis
from redis.exceptions import ExecAbortError

from queues.connection import wire

_combiners: dict[int, "Combiner"] = {}  # id(client) -> its Combiner


def read_one(conn: Any) -> Any:
    """``run``'s ``read`` for a batch of one command: its reply (a script call's: the pop's, the batch script's)."""
    return conn.read_response()


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
    __slots__ = ("commands", "read", "transaction", "ready", "done", "answered", "value", "error", "batch")

    def __init__(self, commands: list[tuple[Any, ...]], read: Callable[[Any], Any], transaction: bool) -> None:
        self.commands = commands
        self.read = read
        self.transaction = transaction  # MULTI, its commands, EXEC; ``read`` answers EXEC's replies, raw
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

    def run(self, commands: list[tuple[Any, ...]], read: Callable[[Any], Any], transaction: bool = False) -> Any:
        """Send ``commands`` (tuples of arguments) and return ``read(connection)``: the caller's reading of their
        replies, exactly as many as they are (a ``redis.ResponseError`` it raises is this batch's alone; anything
        else it raises leaves the connection out of step and fails the batches after it). ``transaction``:
        ``commands`` are ``("MULTI",)``, the commands, ``("EXEC",)``, and ``read`` answers EXEC's replies as they
        came (a command's error in its place; ``batch._read_multi``): it may then go inside one MULTI with the
        other transactions of its write, and get its share of their EXEC's replies (see the module)."""
        request = _Request(commands, read, transaction)
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
        units = _units(batch)
        broken: BaseException | None = None
        aborted: list[_Request] = []  # transactions of a merged one Redis refused: sent again, each on its own
        try:
            conn.send_packed_command(wire.pack(conn, [command for unit in units for command in _commands(unit)]))
        except BaseException as exc:  # noqa: BLE001 — every batch of this write gets it, below
            broken = exc
        try:
            for unit in units:
                if broken is None and len(unit) > 1:
                    try:
                        if not _read_merged(conn, unit):
                            aborted.extend(unit)
                        continue
                    except BaseException as exc:  # noqa: BLE001 — out of step: these and the rest fail with it
                        broken = exc
                for request in unit:
                    broken = _answer(request, conn, broken)
            for request in aborted:
                if broken is None:
                    try:
                        conn.send_packed_command(wire.pack(conn, request.commands))
                    except BaseException as exc:  # noqa: BLE001 — this one and the rest get it
                        broken = exc
                broken = _answer(request, conn, broken)
        finally:
            if broken is not None:
                conn.disconnect()
            pool.release(conn)


def _units(batch: list[_Request]) -> list[list[_Request]]:
    """``batch`` in the units it is sent as: each transaction that follows another joins it, the rest go alone."""
    units: list[list[_Request]] = []
    for request in batch:
        if request.transaction and units and units[-1][0].transaction:
            units[-1].append(request)
        else:
            units.append([request])
    return units


def _commands(unit: list[_Request]) -> list[tuple[Any, ...]]:
    if len(unit) == 1:
        return unit[0].commands
    return [("MULTI",), *(command for request in unit for command in request.commands[1:-1]), ("EXEC",)]


def _read_merged(conn: Any, unit: list[_Request]) -> bool:
    """The replies of the transactions of ``unit`` sent as one, each given its share of EXEC's -> False when Redis
    refused a command as queued (EXECABORT: none of them applied; the caller sends each again on its own)."""
    sizes = [len(request.commands) - 2 for request in unit]
    for _ in range(sum(sizes) + 1):  # the MULTI's OK, then one QUEUED per command
        try:
            conn.read_response()
        except redis.ResponseError:  # refused when queued: EXEC answers EXECABORT
            pass
    try:
        replies = conn.read_response()
    except ExecAbortError:
        return False
    start = 0
    for request, size in zip(unit, sizes, strict=True):
        request.value, request.answered = replies[start : start + size], True
        start += size
    return True


def _answer(request: _Request, conn: Any, broken: BaseException | None) -> BaseException | None:
    """``request``'s replies read from ``conn`` (or ``broken``, the connection's failure, as its error) -> the
    connection's failure after it, if any."""
    if broken is not None:
        request.error, request.answered = broken, True
        return broken
    try:
        request.value = request.read(conn)
    except redis.ResponseError as exc:  # its own replies read: the next ones are in step
        request.error = exc
    except BaseException as exc:  # noqa: BLE001 — out of step: this one and the rest fail with it
        broken = request.error = exc
    request.answered = True
    return broken
