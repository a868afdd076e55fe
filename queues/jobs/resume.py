"""Long jobs that resume where they stopped (issue 34): the cursor, the checkpoint, the pause.

A job that walks many items (pages of a marketplace, rows of a file) writes a checkpoint after each:
``queues.current_job().checkpoint(cursor)`` stores ``cursor`` (any JSON value, at most
``MAX_CURSOR_BYTES`` encoded) in the job's meta (``jobs.meta.CURSOR``), and the next run of the job —
after a pause, a retry, a SIGKILL and the abandoned-job scan — reads it back as ``.cursor``. The items
after the last checkpoint run again: at least once per item (docs/workflows.md#long-jobs-that-resume).

At a checkpoint, once the cursor is written, ``due`` says whether the job must stop here:

==============  =======================================================================  ============
reason          when                                                                      then
==============  =======================================================================  ============
``canceled``    ``queues.cancel`` asked for it while it ran (``CANCEL_REQUESTED``, read   ends canceled
                back in the checkpoint's own round trip)
``stopping``    its worker is stopping (SIGTERM/SIGINT: a deploy): ``stopping()``         back to the
                                                                                          head of its
                                                                                          band
``max_run``     it has run longer than its ``max_run_seconds`` option since this run      back to the
                started                                                                   tail of its
                                                                                          band
==============  =======================================================================  ============

``checkpoint`` then raises ``Pause``, a ``BaseException`` (an ``except Exception`` in the job's code does
not swallow it). The worker turns it into the put-back (``put_back``) or the end (``end_canceled``)
instead of a failure (``failures/handler.py``): a pause costs no attempt (``jobs.meta.mark_interrupted``
counts it in ``interruptions``), and the push is vouched for by ``jobs.meta.PUT_BACK`` = ``pause`` (issue 32).

How the job's code learns that its worker is stopping: a process-wide flag. A worker that runs its jobs in
its own process (``--no-fork``, ``--concurrency N``, a pool member of either kind) registers its own stop
state (``watch_stop``); a forked work horse ignores SIGTERM, and its handler notes the stop here
(``note_stop``) — the worker sends its horse a SIGTERM on its first stop signal (``worker/stop.py``), and a
service manager that signals the whole process group reaches it directly.
"""

import json
from collections.abc import Callable
from typing import Any

from rq.job import JobStatus
from rq.registry import CanceledJobRegistry
from rq.utils import now, utcformat

from queues.jobs import meta as jobmeta
from queues.keyspace import keys

MAX_CURSOR_BYTES = 16_384  # a cursor is a position (an id, an offset, a page token), never the data itself

CANCELED = "canceled"
STOPPING = "stopping"
MAX_RUN = "max_run"

# A field of the job's hash (not a meta key: written without a read-modify-write of ``meta``, which the
# running job itself rewrites at each checkpoint): ``queues.cancel`` of a running job asks it to stop at its
# next checkpoint. Its value: unix seconds of the request.
CANCEL_REQUESTED = "optima_cancel_requested"


class Pause(BaseException):
    """Raised by ``checkpoint`` when the job must stop here (``reason``: ``CANCELED``, ``STOPPING``,
    ``MAX_RUN``; ``why``: the sentence the worker logs). Not an error: the job's code lets it pass."""

    def __init__(self, reason: str, why: str) -> None:
        super().__init__(why)
        self.reason = reason
        self.why = why

    @property
    def canceled(self) -> bool:
        return self.reason == CANCELED

    @property
    def at_tail(self) -> bool:
        """A job paused for its run time goes behind the jobs that waited; one paused by a stop, first."""
        return self.reason == MAX_RUN


def is_pause(exc: object) -> bool:
    return isinstance(exc, Pause)


# -- the cursor ----------------------------------------------------------------------------------
def check_cursor(cursor: Any) -> Any:
    """``cursor`` as it will be read back (JSON: a tuple comes back a list); ``ValueError`` naming the value
    and the fix for one that is not JSON or is larger than ``MAX_CURSOR_BYTES`` encoded."""
    try:
        text = json.dumps(cursor, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"checkpoint(cursor): the cursor must be a JSON value (dict, list, str, int, float, bool or None), "
            f"got {type(cursor).__name__} {_short(cursor)} ({exc}). Store a position, e.g. "
            "checkpoint({'page': 401}) or checkpoint(last_id)."
        ) from None
    size = len(text.encode())
    if size > MAX_CURSOR_BYTES:
        raise ValueError(
            f"checkpoint(cursor): the cursor is {size} bytes of JSON, more than {MAX_CURSOR_BYTES}: "
            f"{_short(cursor)}. A cursor is a position (an id, an offset, a page token), not the items: "
            "store the data elsewhere (the database) and checkpoint where the loop stands."
        )
    return json.loads(text)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# -- when to stop ----------------------------------------------------------------------------------
_stop_noted = False
_stop_check: Callable[[], bool] | None = None


def watch_stop(check: Callable[[], bool] | None) -> None:
    """``check()``: whether this process's worker is stopping (a worker that runs its jobs itself)."""
    global _stop_check
    _stop_check = check


def note_stop() -> None:
    """This process's worker is stopping (the work horse's SIGTERM handler: no lock, no I/O)."""
    global _stop_noted
    _stop_noted = True


def stopping() -> bool:
    return _stop_noted or bool(_stop_check is not None and _stop_check())


def due(job: Any, *, cancel_requested: bool = False) -> Pause | None:
    """The ``Pause`` due at a checkpoint of ``job`` (running now), or None: go on."""
    if cancel_requested:
        return Pause(CANCELED, "it was canceled (queues.cancel) while it ran")
    if stopping():
        return Pause(STOPPING, "its worker is stopping")
    limit = jobmeta.max_run_seconds(job.meta)
    started = getattr(job, "started_at", None)
    if limit is not None and started is not None:
        ran = (now() - (started if started.tzinfo else started.replace(tzinfo=now().tzinfo))).total_seconds()
        if ran >= limit:
            return Pause(MAX_RUN, f"it ran {ran:.1f} s, past its max_run_seconds={limit:g}")
    return None


# -- the worker's side: in the process that ran the job ------------------------------------------------
def put_back(connection: Any, job: Any, pause: Pause, cleanup: Callable[[Any], None]) -> None:
    """The paused ``job`` back to its queue (its band's head, or tail for ``MAX_RUN``) in one MULTI: its
    execution ended (``cleanup(pipe)``: the worker's ``cleanup_execution``), status queued, the pause counted
    in ``interruptions`` (no attempt spent), ``PUT_BACK`` = ``pause`` (its next pop is vouched for)."""
    jobmeta.mark_interrupted(job.meta, f"paused at a checkpoint: {pause.why}")
    band_key = keys.band_key(keys.queue_key(job.origin), jobmeta.band(job))
    with connection.pipeline() as pipe:
        cleanup(pipe)
        job.set_status(JobStatus.QUEUED, pipeline=pipe)
        pipe.hset(
            job.key,
            mapping={
                "meta": job.serializer.dumps(job.meta),
                "enqueued_at": utcformat(now()),
                jobmeta.PUT_BACK: jobmeta.PUT_BACK_PAUSE,
            },
        )
        pipe.hdel(job.key, CANCEL_REQUESTED)
        (pipe.rpush if pause.at_tail else pipe.lpush)(band_key, job.id)
        pipe.execute()


def idempotent(connection: Any, job: Any, status: JobStatus, write: Callable[[], None]) -> Callable[[], None]:
    """``write()`` (``put_back`` or ``end_canceled``, which end in ``status``) made safe to retry through an
    outage (``worker/horse.record_for``): a retry after a MULTI that landed but whose reply was lost finds the
    job in ``status`` already and writes nothing (a second push would put the job in its queue twice)."""
    tried: list[bool] = []

    def attempt() -> None:
        if tried and connection.hget(job.key, "status") == status.value.encode():
            return
        tried.append(True)
        write()

    return attempt


def end_canceled(connection: Any, job: Any, cleanup: Callable[[Any], None]) -> None:
    """The ``job`` canceled while it ran, stopped at its checkpoint: its execution ended, status canceled,
    in its queue's canceled registry (as ``queues.cancel`` leaves a job that had not started)."""
    with connection.pipeline() as pipe:
        cleanup(pipe)
        job.set_status(JobStatus.CANCELED, pipeline=pipe)
        job.ended_at = now()
        pipe.hset(job.key, mapping={"meta": job.serializer.dumps(job.meta), "ended_at": utcformat(job.ended_at)})
        pipe.hdel(job.key, CANCEL_REQUESTED)
        pipe.zadd(CanceledJobRegistry(job.origin, connection=connection).key, {job.id: now().timestamp()})
        pipe.execute()


__all__ = [
    "MAX_CURSOR_BYTES",
    "Pause",
    "check_cursor",
    "due",
    "watch_stop",
    "note_stop",
    "stopping",
    "put_back",
    "end_canceled",
    "idempotent",
]
