"""``QueuesBackend``: Django's Tasks API (``@task``, ``my_task.enqueue(...)``, ``TaskResult``) on the queues.

A Task is a job like any other once enqueued: ``enqueue`` hands it to ``queues.enqueue_call`` (validation,
signature, outbox inside ``transaction.atomic()``, limit keys), so retries and backoff, ``PermanentError`` /
``RetryAfter``, dead letters, failure groups, cancel, metrics and the panel apply unchanged. The job names the
Task's function by its own path (``<module>.<qualname>``) and carries ``meta["task"]`` (this backend's alias,
the Task's priority and ``run_after``): ``get_result`` answers only for such jobs (queues/tasks/results.py).

Where the framework is silent:

- ``QUEUES`` left out accepts every declared queue (the framework's default would be ``["default"]``, a
  queue this app may not have); given, its names must be declared queues (``queues.E080``).
- The Tasks API has no words for a job id, ``unique``, ``limit_key``, ``durable``, ``attempts``, ``timeout``
  or extra meta: ``QueuesTask.using(**options)`` takes them (``QUEUE_OPTIONS``), so a feature needs no
  second API; a Task of another backend has no such option.
- Only Tasks built by this backend (``task_class``) declare themselves jobs: a Task of another backend is
  never written to the queues, so a job naming it in Redis was not written by us and is refused.
"""

import dataclasses
import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from queues.catalog import jobs as catalog
from queues.catalog.queues import queue_names
from queues.exceptions import InvalidJob, QueuesError, UnknownQueue
from queues.tasks import compat, results
from queues.tasks.compat import InvalidTaskError, Task, TaskResult

if TYPE_CHECKING:
    import datetime as dt

# Options of queues.enqueue_call a Task may carry (QueuesTask.using); the Task's own fields give the
# queue (queue_name), the priority and the start (run_after -> at).
QUEUE_OPTIONS = ("attempts", "timeout", "job_id", "unique", "durable", "limit_key", "limit_concurrency", "meta")
OPTIONS = ()  # keys of TASKS[alias]["OPTIONS"] this backend reads: none yet (queues.E081 names any other)


class InvalidTask(InvalidJob, InvalidTaskError):
    """A Task the queues refuse at enqueue: both the framework's ``InvalidTaskError`` and ``queues.InvalidJob``."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueuesTask(Task[Any, Any]):
    """The Task ``@task`` builds for a ``QueuesBackend``: declared a job as it is built (the catalog
    decides, at enqueue and in the worker, whether its module is a job module)."""

    queue_options: dict[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        Task.__post_init__(self)
        from queues.tasks import run  # its import connects the framework's receivers: once a Task is built

        catalog.declare_task(self, run.runner(self))

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: "dt.datetime | None" = None,
        backend: str | None = None,
        **options: Any,
    ) -> "QueuesTask":
        """The framework's ``using``, plus the queues' own options (``QUEUE_OPTIONS``), e.g.
        ``generate.using(timeout=120, limit_key="owner:7", durable=True).enqueue(...)``."""
        task = Task.using(self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend)
        if not options:
            return task
        unknown = [name for name in options if name not in QUEUE_OPTIONS]
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, QUEUE_OPTIONS, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise InvalidTaskError(
                f"{self.module_path}.using(): unknown option {name!r}.{hint} The queues' options "
                f"a Task takes are {', '.join(QUEUE_OPTIONS)}."
            )
        return dataclasses.replace(task, queue_options={**(self.queue_options or {}), **options})


class QueuesBackend(compat.BaseTaskBackend):
    task_class = QueuesTask
    supports_defer = True
    supports_async_task = True  # rq 3 runs the coroutine an async job returns with asyncio.run (Job._execute)
    supports_get_result = True
    supports_priority = True  # three bands of the queue: > 0, 0, < 0 (queues.enqueue's priority=)
    logs_one_line_per_job = True  # the backport's task_started/task_finished log lines are skipped (tasks/run.py)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.declared_queues = tuple(params["QUEUES"]) if params.get("QUEUES") else None
        self.queues = set()  # the framework's own queue check is ours (validate_task): it names the queues

    # -- validation (at decoration, in the framework's Task.__post_init__) -----------------------
    def validate_task(self, task: Task[Any, Any]) -> None:
        name = task.queue_name
        allowed = self.declared_queues
        known = _queue_names()
        if known is None:  # a broken queue configuration: the system checks name it, and enqueue refuses
            known = [name]  # never refused here, at import: that would stop django.setup() before the checks run
        if name not in known or (allowed is not None and name not in allowed):
            choices = [q for q in known if allowed is None or q in allowed]
            where = "a declared queue" if allowed is None else f"one of TASKS[{self.alias!r}]['QUEUES']"
            raise InvalidTaskError(
                f"queue_name={name!r} of task {compat.get_module_path(task.func)} is not {where}: pass one of "
                f"{', '.join(map(repr, choices)) or '(none declared)'}, or declare the queue in an app's queues.py."
            )
        super().validate_task(task)
        if task.run_after is not None and task.run_after.tzinfo is None:  # USE_TZ=False: the framework allows it
            raise InvalidTaskError(f"run_after={task.run_after!r} is a naive datetime: pass an aware one.")

    # -- the producer side --------------------------------------------------------------------------
    # The framework hands a backend only the Tasks its task_class builds: QueuesTask, narrower than the base's Task.
    def enqueue(self, task: QueuesTask, args: Any, kwargs: Any) -> TaskResult[Any]:  # type: ignore[override]
        from queues.producer.api import check_meta_keys, enqueue_call_as_app

        options = dict(task.queue_options) if task.queue_options else {}
        try:
            check_meta_keys(options.get("meta"), "meta")  # the Task's own: the marker below is the app's
        except InvalidJob as exc:
            raise InvalidTask(f"{compat.get_module_path(task.func)}.using(...): {exc}") from exc
        marker: dict[str, Any] = {"backend": self.alias}
        if task.priority:
            marker["priority"] = task.priority
            options["priority"] = task.priority
        if task.run_after is not None:
            marker["run_after"] = task.run_after.isoformat()
        options["meta"] = {**(options.get("meta") or {}), results.TASK: marker}
        try:
            job = enqueue_call_as_app(task.queue_name, task.func, args, kwargs, at=task.run_after, **options)
        except InvalidJob as exc:
            raise InvalidTask(str(exc)) from exc
        except UnknownQueue as exc:  # the queue went away since the Task was built (settings changed)
            raise InvalidTask(str(exc)) from exc
        result = results.enqueued(self.alias, task, job, args, kwargs)
        compat.task_enqueued.send(type(self), task_result=result)
        return result

    # -- results ------------------------------------------------------------------------------------
    def get_result(self, result_id: str) -> TaskResult[Any]:
        return results.get(self.alias, result_id)

    # -- checks ---------------------------------------------------------------------------------------
    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        setting = f"TASKS[{self.alias!r}]"
        if self.declared_queues is not None:
            known = _queue_names()
            unknown = [] if known is None else [q for q in self.declared_queues if q not in known]
            if unknown:
                yield checks.Error(
                    f"{setting}['QUEUES'] names {', '.join(map(repr, unknown))}, not declared queue(s) "
                    f"(declared: {', '.join(map(repr, known or ())) or 'none'}).",
                    hint="Name declared queues only (an app's queues.py or OPTIMA_QUEUES), or leave QUEUES out: "
                    "every declared queue is then accepted.",
                    id="queues.E080",
                )
        extra = [key for key in self.options if key not in OPTIONS]
        if extra:
            yield checks.Error(
                f"{setting}['OPTIONS'] has {', '.join(map(repr, extra))}, which the queues' backend does not read.",
                hint="Leave OPTIONS out: a queue's attempts, timeout and backoff are the queue's own "
                "options (OPTIMA_QUEUES or an app's queues.py).",
                id="queues.E081",
            )


def _queue_names() -> list[str] | None:
    """The declared queues, or None when the queue configuration is broken (the checks report it)."""
    try:
        return list(queue_names())
    except (QueuesError, ImproperlyConfigured):
        return None
