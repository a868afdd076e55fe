"""A job of the queues -> the framework's ``TaskResult``; ``get`` is ``QueuesBackend.get_result``.

=================================================  ==============  =======================================
where the job is (``JobState.state``)              status          notes
=================================================  ==============  =======================================
outbox, queued, held, deferred, scheduled          ``READY``       a retry waiting for its backoff too
started                                            ``RUNNING``
finished                                           ``SUCCESSFUL``  ``return_value``: what the task returned
failed (dead letter), stopped, canceled            ``FAILED``
=================================================  ==============  =======================================

``errors``: one ``TaskError`` per failed attempt of the job's current life (an operator's requeue of a dead
job starts a new one), oldest first, from the job's results stream (kept one entry per attempt,
queues/jobs/stream.py, where rq keeps about ten; the queues store each failed attempt's traceback there:
``RETRIED`` for one that is retried, ``FAILED`` for the last); the
exception's class path is read from its traceback. ``worker_ids``: one name
per counted attempt, kept in ``meta["worker_ids"]`` by the worker (queues/tasks/run.py); an attempt that
went back to its queue without counting (worker stopped, Redis away) is left out, so the framework's
``attempts`` (``len(worker_ids)``) is the queues' attempt count. ``started_at`` and ``last_attempted_at``
are the start of the latest attempt (rq keeps only that one).

A job that is not a task of this backend (no ``meta["task"]`` naming it, or a function that is not a declared
Task) raises ``TaskResultDoesNotExist``: nothing it names is imported.
"""

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import redis
from django.utils import timezone

from queues.catalog import jobs as catalog
from queues.catalog.classes import OptimaJob
from queues.catalog.lookup import job_connection
from queues.connection.clients import get_connection
from queues.exceptions import QueueUnavailable
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.jobs import results as jobresults
from queues.producer import outbox
from queues.tasks import compat
from queues.tasks.compat import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus

if TYPE_CHECKING:
    from rq.job import Job
    from rq.results import Result

# meta key: {"backend": alias, "priority": n (when not 0), "run_after": ISO (when given), "backoff": dotted path
# and "backoff_mac": its seal (when the Task has a BACKOFF: queues/tasks/retries.py)}
TASK = jobmeta.TASK
WORKER_IDS = jobmeta.WORKER_IDS  # meta key: the worker of each counted attempt (queues/tasks/run.py)

READY, RUNNING = TaskResultStatus.READY, TaskResultStatus.RUNNING
FAILED, SUCCESSFUL = TaskResultStatus.FAILED, TaskResultStatus.SUCCESSFUL
STATUS = {
    "outbox": READY,
    "queued": READY,
    "held": READY,
    "rate_limited": READY,
    "deferred": READY,
    "scheduled": READY,
    "started": RUNNING,
    "finished": SUCCESSFUL,
    "failed": FAILED,
    "stopped": FAILED,
    "canceled": FAILED,
}
RAN = {"started", "finished", "failed", "stopped"}  # states whose current attempt has counted
DEAD = {"failed", "stopped"}  # states whose current attempt failed: a dead letter


def aware(when: dt.datetime | None) -> dt.datetime | None:
    if when is None:
        return None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when


def task_of(alias: str | None, job: "Job") -> Task[Any, Any]:
    """The Task ``job`` (an rq job, read as JSON) runs, rebuilt with its queue and priority; raises
    ``TaskResultDoesNotExist`` for a job that is not a task of backend ``alias``. Imports nothing."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    marker = meta.get(TASK)
    func_name = job.func_name
    declared = catalog.task_of(func_name)
    if not isinstance(marker, dict) or marker.get("backend") != alias or declared is None:
        raise TaskResultDoesNotExist(
            f"Job {job.id} is not a task of the Tasks backend {alias!r} (it runs {str(func_name)[:200]!r})."
        )
    changes = {}
    queue = meta.get(jobmeta.QUEUE, job.origin)
    if queue != declared.queue_name:
        changes["queue_name"] = queue
    priority = marker.get("priority", 0)
    if priority != declared.priority and isinstance(priority, int):
        changes["priority"] = priority
    if marker.get("run_after"):
        try:
            changes["run_after"] = dt.datetime.fromisoformat(marker["run_after"])
        except (TypeError, ValueError):
            pass
    task = declared
    if changes:
        try:
            task = declared.using(**changes)
        except compat.InvalidTaskError:  # the queue is gone from the settings since: the declared Task
            pass
    return _with_retries(task, meta.get(jobmeta.ATTEMPTS_ALLOWED), marker.get("backoff"))


def _with_retries(task: Task[Any, Any], attempts: Any, backoff: Any) -> Task[Any, Any]:
    """``task`` with the max attempts and backoff path its job carries (a QueuesTask's fields; nothing imported)."""
    fields = getattr(task, "__dataclass_fields__", {})
    changes: dict[str, Any] = {}
    if isinstance(attempts, int) and not isinstance(attempts, bool) and "queue_options" in fields:
        changes["queue_options"] = {**(getattr(task, "queue_options", None) or {}), "attempts": attempts}
    if isinstance(backoff, str) and "backoff" in fields:
        changes["backoff"] = backoff
    return dataclasses.replace(task, **changes) if changes else task


def build(
    alias: str,
    task: Task[Any, Any],
    job_id: str,
    status: TaskResultStatus,
    *,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    enqueued_at: dt.datetime | None = None,
    started_at: dt.datetime | None = None,
    finished_at: dt.datetime | None = None,
    errors: Iterable[TaskError] = (),
    worker_ids: Iterable[str] = (),
    return_value: Any = None,
) -> TaskResult[Any]:
    if not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        # What was stored, or nothing: never a mapping's keys as the arguments (list() of a dict).
        raise TaskResultDoesNotExist(
            f"Job {job_id} cannot be read as a task (its stored args are {type(args).__name__} and its kwargs "
            f"{type(kwargs).__name__}, not a list and an object)."
        )
    result: TaskResult[Any] = TaskResult(
        task=task,
        id=job_id,
        status=status,
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=finished_at,
        last_attempted_at=started_at,
        args=list(args),
        kwargs=dict(kwargs),
        backend=alias,
        errors=list(errors),
        worker_ids=list(worker_ids),
    )
    if status == SUCCESSFUL:
        object.__setattr__(result, "_return_value", return_value)
    return result


def enqueued(
    alias: str, task: Task[Any, Any], job: "Job", args: Sequence[Any], kwargs: dict[str, Any]
) -> TaskResult[Any]:
    """The result ``enqueue`` returns: READY (``unique`` may give back a job already waiting: READY too)."""
    return build(
        alias, task, job.id, READY, args=args, kwargs=kwargs, enqueued_at=aware(job.enqueued_at) or timezone.now()
    )


def exception_path(exc_string: str | None) -> str:
    """The dotted class of the exception a formatted traceback ends with ("builtins.ValueError");
    ``queues.exceptions.QueuesError`` for a failure that is no traceback (a job refused, a worker lost)."""
    lines = (exc_string or "").splitlines()
    start = max(
        (i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), default=None
    )
    if start is not None:
        for line in lines[start + 1 :]:
            if line and not line[0].isspace():
                head = line.partition(":")[0].strip()
                if head and " " not in head:
                    return head if "." in head else f"builtins.{head}"
                break
    return "queues.exceptions.QueuesError"


def counted_workers(job: "Job", state: str) -> list[str]:
    """The worker of each counted attempt (see the module docstring)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    ids = meta.get(WORKER_IDS)
    if not isinstance(ids, list):
        return []
    attempt = attempt_due(meta, state)
    counted = attempt if state in RAN else attempt - 1
    return [str(name) for name in ids[: max(counted, 0)]]


def attempt_due(meta: dict[str, Any], state: str) -> int:
    """The job's current attempt (1-based): 1 for a dead job an operator requeued, whose new life the worker
    starts as it pops it (``jobmeta.new_life``): until then its meta still reads dead, at its last attempt."""
    if meta.get(jobmeta.DEAD) and state not in DEAD:
        return 1
    attempt = meta.get(jobmeta.ATTEMPT, 1)
    return attempt if isinstance(attempt, int) and not isinstance(attempt, bool) else 1


def failures_counted(job: "Job", state: str) -> int:
    """The failed attempts of the job's current life: every attempt before the current one, and the current
    one too once the job is dead (an operator's requeue starts a new life at attempt 1)."""
    attempt = attempt_due(job.meta if isinstance(job.meta, dict) else {}, state)
    return max(attempt if state in DEAD else attempt - 1, 0)


def errors_of(job: "Job", state: str, entries: "list[Result] | None" = None) -> list[TaskError]:
    """One ``TaskError`` per failed attempt of the job's current life, oldest first, from its results stream
    (one entry per attempt: queues/jobs/stream.py; ``entries``, newest first, when the caller read them and they
    reach that far), the exception's class path read from each traceback."""
    wanted = failures_counted(job, state)
    if not wanted:
        return []
    if entries is not None and len(entries) < wanted + 1 and len(entries) >= jobresults.RESULTS_READ:
        entries = None  # the caller's read stopped short of this life's first failure: read as far as it goes
    failures = [
        entry.exc_string
        for entry in (
            jobresults.read(job, count=max(jobresults.RESULTS_READ, wanted + 1)) if entries is None else entries
        )  # newest first
        if entry.type in (entry.Type.FAILED, entry.Type.RETRIED) and entry.exc_string
    ][:wanted]
    return [TaskError(exception_class_path=exception_path(text), traceback=text) for text in reversed(failures)]


def of_job(alias: str | None, job: "Job", state: str) -> TaskResult[Any]:
    """The TaskResult of ``job`` (read from Redis) whose rq state is ``state``."""

    task = task_of(alias, job)  # raises for a job of no backend (alias None)
    status = STATUS.get(state, READY)
    entries = jobresults.read(job)  # newest first
    errors = errors_of(job, state, entries)
    return_value = None
    if status == SUCCESSFUL:
        return_value = next((entry.return_value for entry in entries if entry.type == entry.Type.SUCCESSFUL), None)
    ran = state in RAN or bool(errors)
    return build(
        cast(str, alias),
        task,
        job.id,
        status,
        args=job.args,
        kwargs=job.kwargs,
        enqueued_at=aware(job.enqueued_at or job.created_at),
        started_at=aware(job.started_at) if ran else None,
        finished_at=aware(job.ended_at) if status in (FAILED, SUCCESSFUL) else None,
        errors=errors,
        worker_ids=counted_workers(job, state),
        return_value=return_value,
    )


def get(alias: str, result_id: str) -> TaskResult[Any]:
    """``QueuesBackend.get_result``: the TaskResult of job ``result_id``, from Redis or the outbox."""

    if not isinstance(result_id, str) or not result_id or jobread.why_id(result_id) is not None:
        raise TaskResultDoesNotExist(f"{str(result_id)[:200]!r} is not a job id.")
    connection = job_connection(result_id)  # the job's own Redis server (QUEUES_REDIS_SERVERS)
    try:
        job = jobread.fetch(result_id, connection, check_origin=False)
    except (redis.RedisError, QueueUnavailable):
        job = None
        if outbox.waiting(result_id) is None:
            raise
    if job is None:
        entry = outbox.waiting(result_id)
        if entry is None:
            connection = job_connection(result_id)  # pushed between the two reads: now on its server
            job = jobread.fetch(result_id, connection, check_origin=False)
            if job is None:
                raise TaskResultDoesNotExist(f"No job {result_id!r} in Redis or in the outbox.")
        else:
            staged = OptimaJob(result_id, connection=get_connection())
            staged.restore(outbox.decode(entry.job))
            return build(
                alias,
                task_of(alias, staged),
                result_id,
                READY,
                args=staged.args,
                kwargs=staged.kwargs,
                enqueued_at=aware(entry.created_at),
            )
    if jobread.is_corrupt(job):
        raise TaskResultDoesNotExist(f"Job {job.id} cannot be read as a task ({job.why}).")
    state = job.get_status(refresh=False)
    return of_job(alias, job, getattr(state, "value", state))
