"""Retries and backoff: the policy, and the worker's handling of a failed attempt.

The life of a job that fails (docs/lifecycle.md tells it with the Redis keys):

1. An attempt raises. ``job.meta["attempt"]`` says which attempt it was (1-based) and
   ``job.meta["attempts_allowed"]`` how many it gets in all (enqueue > queue > global).
2. Attempts left and a retryable error: the next attempt is put in RQ's ScheduledJobRegistry
   (``<prefix>:scheduled:<queue>``) scored at *failure time + delay*, with ``delay =
   backoff_delay(attempt, policy)`` — 1, 2, 4, 8 s by default — or the seconds of a
   ``queues.RetryAfter``. RQ's scheduler (inside ``rqworker``) moves it back to the queue when due; when
   no scheduler runs, it simply waits there, so a retry is late but never lost.
3. No attempts left, a ``PermanentError`` or a queue's ``non_retryable`` class, or a timeout on the last
   attempt: the job is dead. It stays in RQ's FailedJobRegistry with no expiry and is mirrored into the
   ``DeadLetter`` table (``queues/failures/deadletter.py``) for investigation; an operator retries or discards it.

``RetryAfter`` uses up an attempt: a server that answers 429 forever still ends in the dead letter
instead of keeping a job alive for ever.

A job may carry its own backoff: a Task of Django's Tasks API with a ``BACKOFF`` (queues/tasks/retries.py,
which installs the reader here with ``install_job_backoff``, so that this module imports nothing of the
Tasks framework). After the attempts, ``PermanentError`` and ``RetryAfter``, it decides instead of
``backoff_delay``: seconds (retry then) or None (dead, ``exhausted``); when it raises, the error is logged
and ``backoff_delay`` applies. A worker lost mid-job (no exception object) uses the queue's backoff.

The policy functions are pure (no Redis, no settings): ``resolve_policy``, ``backoff_delay`` and
``decide``. ``queue_retry`` writes one retry into a pipeline; ``schedule_retry`` is the whole retry
for paths outside the worker (an abandoned job); the worker's side is ``queues/failures/handler.py``.
"""

import datetime as dt
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.utils.module_loading import import_string
from rq.job import JobStatus
from rq.registry import ScheduledJobRegistry
from rq.timeouts import JobTimeoutException

from queues import conf, rqcompat
from queues.catalog.lookup import get_config
from queues.events import hooks
from queues.exceptions import PermanentError, RetryAfter, UnknownQueue
from queues.jobs import meta as jobmeta
from queues.producer import limits

logger = logging.getLogger("queues.retry")  # a documented logger name: kept when the module moved

POLICY_KEYS = ("attempts", "backoff", "backoff_max", "jitter", "non_retryable")

# Why a job reached the dead letter (DeadLetter.reason, the ``job_dead`` signal's ``reason``).
EXHAUSTED = "exhausted"  # every attempt failed
PERMANENT = "permanent"  # PermanentError or a queue's non_retryable class: retrying cannot help
TIMEOUT = "timeout"  # the last attempt ran past the queue's timeout
ABANDONED = "abandoned"  # its worker died mid-job and no attempt was left (queues/worker/abandoned.py)
STOPPED = "stopped"  # an operator stopped the running job (RQ's stop-job command)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # runs in all, the first included
    backoff: float = 1.0  # seconds before the first retry; doubles on each further retry
    backoff_max: float | None = None  # seconds; cap of the exponential delay (None: no cap)
    jitter: float = 0.0  # fraction 0..1 of the delay added at random
    non_retryable: tuple = ()  # dotted paths (or classes) of exceptions that dead-letter at once
    # the job's own backoff, when it carries one (a Task's BACKOFF): exception -> seconds, or None for no retry
    own_backoff: Callable[[BaseException], float | None] | None = field(default=None, compare=False)


def resolve_policy(enqueue_opts=None, queue_opts=None, global_opts=None):
    """The RetryPolicy for one job: per-enqueue options, then per-queue, then global.

    A key absent from a layer falls through to the next; in ``enqueue_opts`` a value of None also
    means "not given" (``enqueue(attempts=None)``). Unknown keys are ignored (a queue's options also
    hold timeouts and TTLs).
    """
    merged = {}
    for layer in (global_opts or {}, queue_opts or {}):
        merged.update({k: v for k, v in layer.items() if k in POLICY_KEYS})
    merged.update({k: v for k, v in (enqueue_opts or {}).items() if k in POLICY_KEYS and v is not None})
    if "non_retryable" in merged:
        merged["non_retryable"] = tuple(merged["non_retryable"] or ())
    return RetryPolicy(**merged)


def backoff_delay(attempt, policy, rand=random.random):
    """Seconds to wait before the attempt after ``attempt`` (the 1-based attempt that just failed).

    ``backoff * 2 ** (attempt - 1)``, capped at ``backoff_max``, plus up to ``jitter`` of it at random:
    1, 2, 4, 8 s for the default policy. ``rand`` returns a float in [0, 1) (injectable for tests).
    """
    if attempt < 1:
        raise ValueError(f"attempt must be >= 1 (the attempt that failed), got {attempt!r}.")
    delay = float(policy.backoff) * 2 ** (attempt - 1)
    if policy.backoff_max is not None:
        delay = min(delay, float(policy.backoff_max))
    if policy.jitter:
        delay += delay * policy.jitter * rand()
    return delay


def is_non_retryable(exc, policy):
    """True for a PermanentError or an instance of one of the policy's ``non_retryable`` classes."""
    if isinstance(exc, PermanentError):
        return True
    for entry in policy.non_retryable:
        try:
            cls = import_string(entry) if isinstance(entry, str) else entry
        except ImportError:
            logger.error("non_retryable entry %r cannot be imported; ignored (see check queues.E007)", entry)
            continue
        if isinstance(exc, cls):
            return True
    return False


@dataclass(frozen=True)
class Decision:
    retry: bool
    delay: float = 0.0  # seconds, when retry
    reason: str = ""  # dead-letter reason, when not retry


def decide(attempt, policy, exc, rand=random.random):
    """What to do after attempt ``attempt`` failed with ``exc`` (None: no exception object, e.g. a
    killed work horse). Pure, but for the policy's ``own_backoff`` (the job's own, called only here)."""
    if exc is not None and is_non_retryable(exc, policy):
        return Decision(False, reason=PERMANENT)
    if attempt >= policy.attempts:
        return Decision(False, reason=TIMEOUT if isinstance(exc, JobTimeoutException) else EXHAUSTED)
    if isinstance(exc, RetryAfter):
        return Decision(True, delay=exc.seconds)
    if policy.own_backoff is not None and exc is not None:
        try:
            delay = policy.own_backoff(exc)
        except Exception:  # noqa: BLE001 — the app's code: its failure must not lose the job
            logger.exception("The job's own backoff failed after attempt %d; the queue's backoff applies", attempt)
        else:
            return Decision(False, reason=EXHAUSTED) if delay is None else Decision(True, delay=delay)
    return Decision(True, delay=backoff_delay(attempt, policy, rand))


_job_backoff = None  # job -> its own backoff or None (install_job_backoff)


def install_job_backoff(reader):
    """Let ``policy_for`` ask ``reader(job)`` for a job's own backoff (queues/tasks/retries.py installs
    the Tasks backend's when a Task is first built): a callable ``exception -> seconds or None``, or None."""
    global _job_backoff
    _job_backoff = reader


def policy_for(job):
    """The job's policy: its own ``attempts_allowed`` (set at enqueue), then its queue's options."""

    enqueue_opts = {"attempts": jobmeta.attempts_allowed(job)}
    try:
        queue_opts = get_config(jobmeta.queue_name(job)).options
    except UnknownQueue:
        queue_opts = {}
    policy = resolve_policy(enqueue_opts, queue_opts, conf.JOB_DEFAULTS)
    own = _job_backoff(job) if _job_backoff is not None else None
    return policy if own is None else replace(policy, own_backoff=own)


def queue_retry(job, queue, delay, pipeline, *, failed_at=None, reason=""):
    """Add the writes of one retry to ``pipeline`` (a MULTI): meta (next attempt), status, and either
    the ScheduledJobRegistry entry scored at ``failed_at + delay`` (exact, float seconds) or, for no
    delay, the queue itself.

    A job with a limit key (queues/producer/limits.py) gives its slot back in the same MULTI — a job waiting
    for its retry holds none, and the next held job of its key is promoted — and its re-queue goes
    through the limit again: at once for no delay (held behind the key's other held jobs when no
    slot is free), by rq's scheduler when the delay is over. A job with a rate (queues/producer/rates.py)
    is held by its rate again either way — each start is charged, a retry's too: for no delay here, after
    a delay by the RQ scheduler's move (queues/periodic/supervision.py). Returns True when the slot was
    released here (the caller must not release it again)."""
    failed_at = failed_at or dt.datetime.now(dt.UTC)
    jobmeta.next_attempt(job.meta, jobmeta.current_attempt(job), failed_at, reason)
    # the wait histogram counts from when the retry is due (rq's enqueued_at is the scheduler's later move)
    jobmeta.set_due(job.meta, failed_at.timestamp() + float(delay) if delay and delay > 0 else None)
    limited = limits.is_limited(job)
    pipeline.hset(job.key, jobmeta.PUT_BACK, jobmeta.PUT_BACK_RETRY)  # the push says so in the job (gate.replayed)
    if delay and delay > 0:
        job.set_status(JobStatus.SCHEDULED, pipeline=pipeline)
        job.save(pipeline=pipeline)
        pipeline.sadd(queue.redis_queues_keys, queue.key)
        registry = ScheduledJobRegistry(queue.name, connection=job.connection, serializer=job.serializer)
        pipeline.zadd(registry.key, {job.id: failed_at.timestamp() + float(delay)})
        if limited:
            limits.release_into(job, pipeline)
    else:
        job.save(pipeline=pipeline)
        if limits.goes_through_limit(job):  # a concurrency, a rate (charged again: each start is), or both
            limits.requeue_into(queue, job, pipeline)
        else:
            rqcompat.enqueue_prepared(queue, job, pipeline)  # RQ's own retry path does the same
    return limited


def schedule_retry(job, queue, *, delay=None, reason=""):
    """Use up the job's current attempt and schedule the next one; False when no attempt is left.

    ``delay`` in seconds (None: the policy's backoff after this attempt). For callers outside the
    worker's failure handling (the abandoned-job path of queues/worker/abandoned.py): it does not touch the
    started registry, and calls the hooks' ``after_retry`` (``job_retry_scheduled``).
    """
    job.get_meta(refresh=True)
    policy = policy_for(job)
    attempt = jobmeta.current_attempt(job)
    if attempt >= policy.attempts:
        return False
    if delay is None:
        delay = backoff_delay(attempt, policy)
    with job.connection.pipeline() as pipeline:
        queue_retry(job, queue, delay, pipeline, reason=reason)
        pipeline.execute()
    logger.info(
        "Job %s (%s): attempt %d failed (%s); attempt %d in %.3gs",
        job.id,
        jobmeta.queue_name(job),
        attempt,
        reason or "retry",
        attempt + 1,
        delay,
    )
    hooks.after_retry(job, jobmeta.queue_name(job), attempt=attempt, delay=float(delay), reason=reason or "retry")
    return True


def exc_summary(exc_info=None, exc_string=""):
    """(exc_type, exc_message) of a failure: from the exception when there is one, else parsed from
    the last line of a formatted traceback ("module.Type: message")."""
    if exc_info and exc_info[0] is not None:
        cls, value = exc_info[0], exc_info[1]
        module = cls.__module__
        name = cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"
        return name, str(value)
    lines = [line for line in (exc_string or "").strip().splitlines() if line.strip()]
    if not lines:
        return "", ""
    last = lines[-1].strip()
    head, sep, tail = last.partition(": ")
    if sep and " " not in head:
        return head, tail
    return "", last


__all__ = [
    "RetryPolicy",
    "resolve_policy",
    "backoff_delay",
    "decide",
    "install_job_backoff",
    "queue_retry",
    "schedule_retry",
    "exc_summary",
    "EXHAUSTED",
    "PERMANENT",
    "TIMEOUT",
    "ABANDONED",
    "STOPPED",
]
