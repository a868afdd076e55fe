"""What a job's owner may be told about it: ``queues.job_state(job_id)``, one shape wherever the job is.

A job is in one of three places, and each answers with the same fields (``JobState.FIELDS``):

- the outbox (accepted inside a transaction, not yet written to Redis): state ``outbox``;
- Redis: rq's state, ``held`` for rq's ``rate_limited`` (waiting for its limit key: a slot of its concurrency,
  a token of its rate or a resume of the key, with ``held_by``), and the last attempt's error while it is dead or
  waiting for a retry;
- Redis, but unreadable (planted, or written by something else): state ``corrupt``, ``why`` says why.

The producer's side of a job's state (its outbox, its limit keys) is installed into this module at the
app's ready (``install``, queues/apps.py), so that ``jobs/`` does not import ``producer/``: the producer
writes what ``jobs`` defines, never the other way round.

``meta`` carries the job's meta (empty for a corrupt job), so that a caller can decide who may see it
(features/sellers/owners.py) before showing anything. ``error`` is the raw exception string of the
last failed attempt: a public API shows only its last line (features/redaction.py).
"""

import datetime as dt
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

import redis

from queues.catalog.lookup import job_connection
from queues.exceptions import QueueUnavailable
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread

if TYPE_CHECKING:
    from rq.job import Job

logger = logging.getLogger("queues")

HELD = "rate_limited"  # rq's status of a job held for a slot of its limit key (producer/limits.py: HELD)


@dataclass(frozen=True)
class Producer:
    """What the state of a job needs from the producer: ``waiting(job_id)`` (its outbox row or None),
    ``stored_meta(row)`` (that row's meta, a dict), ``hold_of(job)`` (its limit key's ``Hold`` or None)."""

    waiting: Callable[[str], Any]  # job id -> its outbox entry, or None
    stored_meta: Callable[[Any], dict[str, Any]]  # an outbox entry -> the meta it will be enqueued with
    hold_of: Callable[[Any], Any]  # a job -> its limit key's hold, or None


_producer: Producer = None  # type: ignore[assignment]  # installed at the app's ready, before any read


def install(producer: Producer) -> None:
    """Give this module the producer's side (queues/apps.py, at ready)."""
    global _producer
    _producer = producer


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str  # outbox, queued, scheduled, deferred, held, started, finished, failed, stopped, canceled, corrupt
    queue: str | None = None
    attempt: int | None = None
    attempts_allowed: int | None = None
    progress: Any = None  # JSON as the job wrote it
    result: Any = None  # JSON: the job's return value
    error: str | None = None  # the last failed attempt's exception string (raw: may name internals)
    dead_reason: str | None = None
    held_by: dict[str, int | float | str | bool | None] | None = None
    enqueued_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    why: str = ""  # a corrupt job: why it cannot be read

    PUBLIC: ClassVar[tuple[str, ...]] = (
        "job_id",
        "queue",
        "state",
        "attempt",
        "attempts_allowed",
        "progress",
        "result",
        "error",
        "dead_reason",
        "held_by",
        "enqueued_at",
        "started_at",
        "ended_at",
    )

    def as_dict(self) -> dict[str, Any]:
        """The public fields, in the order of the API's payload (no ``meta``, no ``why``)."""
        return {name: getattr(self, name) for name in self.PUBLIC}

    def but(self, **changes: Any) -> "JobState":
        return replace(self, **changes)


def job_state(job_id: str, connection: redis.Redis | None = None) -> JobState | None:
    """The state of job ``job_id`` (``JobState``), or None when neither Redis nor the outbox has it.

    Raises ``QueueUnavailable`` when Redis cannot be read and the outbox does not have the job (a job
    accepted while Redis is down is still answered from the outbox)."""
    connection = connection or job_connection(job_id)  # the job's own server (QUEUES_REDIS_SERVERS)
    try:
        job = jobread.fetch(job_id, connection, check_origin=False)
    except (redis.RedisError, QueueUnavailable):
        state = in_outbox(job_id)
        if state is None:
            raise
        return state
    if job is None:
        state = in_outbox(job_id)
        if state is not None:
            return state
        # Pushed between the two reads (its row deleted just now): Redis has it by now.
        job = jobread.fetch(job_id, connection, check_origin=False)
        if job is None:
            return None
    if jobread.is_corrupt(job):
        return _corrupt(job)
    try:
        return of_job(job)
    except (redis.ConnectionError, redis.TimeoutError):
        raise
    except Exception as exc:  # noqa: BLE001 — e.g. an unreadable results stream
        return _corrupt(jobread.CorruptJob(job.id, f"{type(exc).__name__} while reading its status"))


def in_outbox(job_id: str) -> JobState | None:
    """The state of a job accepted but still in the outbox, or None when the outbox does not hold it."""
    entry = _producer.waiting(job_id)
    if entry is None:
        return None
    meta = _producer.stored_meta(entry)
    return JobState(
        job_id=entry.job_id,
        state="outbox",
        queue=meta.get(jobmeta.QUEUE, entry.queue),
        attempts_allowed=meta.get(jobmeta.ATTEMPTS_ALLOWED),
        meta=meta,
    )


def of_job(job: "Job") -> JobState:
    """The state of an rq job read from Redis."""
    status = job.get_status(refresh=False)
    state: str = getattr(status, "value", status)
    meta = job.meta or {}
    if state == HELD:
        state = "held"  # rq's "rate_limited": waiting outside the queue for its limit key (a slot, a token, a resume)
    held_by = None
    if state in ("held", "queued", "started"):
        hold = _producer.hold_of(job)  # None without a limit key (a concurrency, a rate, or both)
        held_by = hold.as_dict() if hold is not None else None
    result = error = None
    if state == "finished":
        result = job.return_value()
    elif state == "failed" or meta.get(jobmeta.LAST_FAILED_AT):
        # Dead, or a retry waiting for its backoff: the last attempt's error either way.
        latest = job.latest_result()
        error = getattr(latest, "exc_string", None) if latest is not None else None
    return JobState(
        job_id=job.id,
        queue=jobmeta.queue_name(job),
        state=state,
        attempt=_count(meta.get(jobmeta.ATTEMPT)),
        attempts_allowed=_count(jobmeta.attempts_allowed(job)),
        progress=_finite(jobmeta.progress(meta)),
        result=_finite(result),
        error=error,
        dead_reason=meta.get(jobmeta.DEAD) or None,
        held_by=held_by,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at,
        ended_at=job.ended_at,
        meta=meta,
    )


def _count(value: object) -> int | None:
    """A count of the job's meta, or None when what Redis held is no integer (NaN, 1e999, text)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _finite(value: Any) -> Any:
    """``value`` (JSON as Redis held it) with every number that is not finite (NaN, 1e999) as None:
    strict JSON, which the API renders, has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _corrupt(job: jobread.CorruptJob) -> JobState:
    logger.error("job status: job %s cannot be read: %s", job.id, job.why)
    return JobState(job_id=job.id, state="corrupt", error=f"The job cannot be read from Redis: {job.why}.", why=job.why)


__all__ = ["JobState", "job_state", "in_outbox", "of_job", "install", "Producer"]
