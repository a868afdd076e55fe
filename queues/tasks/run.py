"""In the worker: what runs a Task, and the framework's ``task_started`` / ``task_finished``.

- ``runner(task)``: what the catalog runs for the Task's path: its function itself (sync or ``async def``:
  rq 3 runs the coroutine an async job returns with ``asyncio.run``, an ``rqworker --async`` worker on its event
  loop: ``queues/jobs/coroutines.py``), or, for ``takes_context=True``, a
  wrapper that hands it a ``TaskContext`` whose ``attempt`` is the attempt number.
- The queues' own signals (queues/worker/signals.py) drive the framework's: ``job_started`` -> the
  attempt's worker recorded in ``meta["worker_ids"]`` (one HSET, tasks only), then ``task_started``;
  ``job_succeeded`` -> ``task_finished`` (SUCCESSFUL); ``job_dead`` -> ``task_finished`` (FAILED). A
  failed attempt that will be retried sends nothing: the task is READY again, not finished.
- The backport logs every ``task_started`` / ``task_finished`` (INFO; a failure with a traceback) on the
  logger ``django_tasks``; the worker already logs one line per job, so for this backend's tasks those
  two receivers are skipped (``quiet_backport_logging``); other backends' tasks are logged as before.

The receivers are connected when this module is imported: by the first QueuesTask built (a job module
importing ``@task``), so a worker that can run a Task always has them.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from rq import get_current_job

from queues import rqcompat
from queues.catalog import jobs as catalog
from queues.events import signals as events
from queues.jobs import meta as jobmeta
from queues.tasks import compat, results

if TYPE_CHECKING:
    from rq.job import Job


def runner(task: compat.Task[Any, Any]) -> Callable[..., Any]:
    """The callable a job naming ``task``'s function runs."""
    if not task.takes_context:
        return task.func
    func = task.func

    def run_with_context(*args: Any, **kwargs: Any) -> Any:
        job = cast("Job", get_current_job())  # this runs inside a worker's job: there is one
        result = getattr(job, "_task_result", None) or running(job)
        return func(compat.TaskContext(task_result=result), *args, **kwargs)

    run_with_context.__module__, run_with_context.__qualname__ = func.__module__, func.__qualname__
    run_with_context.__wrapped__ = func  # type: ignore[attr-defined]  # what functools.wraps would set
    return run_with_context


def _backend_of(job: "Job") -> str | None:
    """The alias of the Tasks backend ``job``'s Task was enqueued through; None for a job that runs no
    declared Task. A ``task`` marker on a plain job (the public API refuses it in ``meta=`` since issue
    32; a job of an older release, or one written by hand, may carry it) is ignored: the receivers
    skip the job, where they raised for it on every run (two ERROR lines)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    marker = meta.get(results.TASK)
    alias = marker.get("backend") if isinstance(marker, dict) else None
    if not isinstance(alias, str):
        return None
    try:
        func_name = job.func_name
    except Exception:  # noqa: BLE001 — a job whose function cannot be read is no Task either
        return None
    return alias if catalog.task_of(func_name) is not None else None


def running(job: "Job") -> compat.TaskResult[Any]:
    """The RUNNING TaskResult of the attempt ``job`` is on (in its process; no Redis read)."""
    alias = _backend_of(job)
    task = results.task_of(alias, job)  # raises for a job of no backend (alias None)
    return results.build(
        cast(str, alias),
        task,
        job.id,
        results.RUNNING,
        args=job.args,
        kwargs=job.kwargs,
        enqueued_at=results.aware(job.enqueued_at or job.created_at),
        started_at=results.aware(job.started_at),
        worker_ids=results.counted_workers(job, "started"),
    )


def _sender(job: "Job") -> type[compat.BaseTaskBackend]:
    """The framework's signals' sender: the class of the backend the job's Task was enqueued through (by its
    alias in the job's meta); the base class when that alias is no longer configured."""
    try:
        return type(compat.task_backends[cast(str, _backend_of(job))])  # the callers saw a backend
    except compat.InvalidTaskBackendError:
        return compat.BaseTaskBackend


def on_job_started(sender: object, job: "Job", **kwargs: Any) -> None:
    if _backend_of(job) is None:
        return
    attempt = jobmeta.current_attempt(job)
    ids = job.meta.get(results.WORKER_IDS)
    ids = list(ids[: attempt - 1]) if isinstance(ids, list) else []
    ids.append(job.worker_name or "")
    job.meta[results.WORKER_IDS] = ids
    job.save_meta()  # type: ignore[no-untyped-call]  # rq's save_meta is not annotated
    result = running(job)
    job._task_result = result  # type: ignore[attr-defined]  # the attempt's TaskResult, read by run_with_context
    compat.task_started.send(_sender(job), task_result=result)


def _finished(job: "Job", status: compat.TaskResultStatus, return_value: Any = None) -> compat.TaskResult[Any]:
    result = getattr(job, "_task_result", None) or running(job)
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", results.aware(job.ended_at))
    if status == results.SUCCESSFUL:
        object.__setattr__(result, "_return_value", return_value)
    return result


def on_job_succeeded(sender: object, job: "Job", **kwargs: Any) -> None:
    if _backend_of(job) is None:
        return
    value = rqcompat.cached_result(job)
    try:
        value = compat.normalize_json(value)
    except (TypeError, ValueError):
        pass
    compat.task_finished.send(_sender(job), task_result=_finished(job, results.SUCCESSFUL, value))


def on_job_dead(sender: object, job: "Job", reason: str | None = None, **kwargs: Any) -> None:
    if _backend_of(job) is None:
        return
    try:
        result = results.of_job(_backend_of(job), job, "failed")  # with every attempt's error
    except compat.TaskResultDoesNotExist:
        return
    compat.task_finished.send(_sender(job), task_result=result)


def quiet_backport_logging() -> None:
    """Skip the backport's logging receivers for this backend's tasks (see the module docstring)."""
    for signal, receiver in compat.BACKPORT_LOG_RECEIVERS.items():
        signal.disconnect(receiver)

        def logged(sender: type, task_result: compat.TaskResult[Any], receiver: Any = receiver, **kwargs: Any) -> None:
            if not getattr(sender, "logs_one_line_per_job", False):  # QueuesBackend: its worker logs each job
                receiver(sender=sender, task_result=task_result, **kwargs)

        signal.connect(logged, weak=False, dispatch_uid=f"queues.tasks.{receiver.__name__}")


events.job_started.connect(on_job_started, dispatch_uid="queues.tasks.started")
events.job_succeeded.connect(on_job_succeeded, dispatch_uid="queues.tasks.succeeded")
events.job_dead.connect(on_job_dead, dispatch_uid="queues.tasks.dead")
quiet_backport_logging()
