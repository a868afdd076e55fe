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
- Retries in the shape proposed for Django (django/new-features#142): ``OPTIONS`` ``MAX_ATTEMPTS`` and
  ``BACKOFF``, ``using(max_attempts=..., backoff=...)`` per Task (``max_attempts`` is the queues' ``attempts``
  by its Tasks name); queues/tasks/retries.py validates them, seals the backoff's path into the job, and
  hands it to the worker's retry decision.
- Only Tasks built by this backend (``task_class``) declare themselves jobs: a Task of another backend is
  never written to the queues, so a job naming it in Redis was not written by us and is refused.
"""

import dataclasses
import difflib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from queues.catalog import jobs as catalog
from queues.catalog.queues import queue_names
from queues.exceptions import InvalidJob, QueuesError, UnknownQueue
from queues.tasks import compat, results, retries
from queues.tasks.compat import InvalidTaskError, Task, TaskResult

if TYPE_CHECKING:
    import datetime as dt

# Options of queues.enqueue_call a Task may carry (QueuesTask.using); the Task's own fields give the
# queue (queue_name), the priority and the start (run_after -> at).
QUEUE_OPTIONS = ("attempts", "timeout", "job_id", "unique", "durable", "limit_key", "limit_concurrency", "meta")
OPTIONS = (retries.MAX_ATTEMPTS, retries.BACKOFF)  # keys of TASKS[alias]["OPTIONS"] read (queues.E081: any other)


class InvalidTask(InvalidJob, InvalidTaskError):
    """A Task the queues refuse at enqueue: both the framework's ``InvalidTaskError`` and ``queues.InvalidJob``."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueuesTask(Task[Any, Any]):
    """The Task ``@task`` builds for a ``QueuesBackend``: declared a job as it is built (the catalog
    decides, at enqueue and in the worker, whether its module is a job module)."""

    queue_options: dict[str, Any] | None = dataclasses.field(default=None, compare=False, repr=False)
    backoff: str | None = dataclasses.field(default=None, compare=False)  # dotted path (using(backoff=...))

    @property
    def max_attempts(self) -> int | None:
        """Runs in all set by ``using(max_attempts=...)`` (or ``attempts=``); None: the backend's, then the queue's."""
        return (self.queue_options or {}).get("attempts")

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
        max_attempts: int | None = None,
        backoff: "Callable[[BaseException, TaskResult[Any]], float | None] | str | None" = None,
        **options: Any,
    ) -> "QueuesTask":
        """The framework's ``using``, plus retries (``max_attempts``, ``backoff``: a callable or its dotted path;
        queues/tasks/retries.py) and the queues' own options (``QUEUE_OPTIONS``), e.g.
        ``generate.using(timeout=120, limit_key="owner:7", durable=True).enqueue(...)``."""
        task = Task.using(self, priority=priority, queue_name=queue_name, run_after=run_after, backend=backend)
        task = self._with_retries(task, max_attempts, backoff, options.get("attempts"))
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
        return dataclasses.replace(task, queue_options={**(task.queue_options or {}), **options})

    def _with_retries(self, task: "QueuesTask", max_attempts: Any, backoff: Any, attempts: Any) -> "QueuesTask":
        """``task`` with ``using()``'s retries; ``InvalidTask`` naming the argument, its value and the fix."""
        changes: dict[str, Any] = {}
        where = f"{self.module_path}.using"
        try:
            if max_attempts is not None:
                problem = retries.attempts_problem(max_attempts, f"{where}(max_attempts=...)")
                if problem is not None:
                    raise problem
                if attempts is not None and attempts != max_attempts:
                    raise retries.BadOption(
                        f"{where}(): max_attempts={max_attempts!r} and attempts={attempts!r} disagree.",
                        "They are one option (max_attempts is its Tasks API name): pass one.",
                        "queues.E083",
                    )
                changes["queue_options"] = {**(task.queue_options or {}), "attempts": max_attempts}
            if backoff is not None:
                changes["backoff"] = retries.backoff_path(backoff, f"{where}(backoff=...)", callable_ok=True)
        except retries.BadOption as exc:
            raise InvalidTask(f"{exc} {exc.hint}") from None
        return dataclasses.replace(task, **changes) if changes else task


class QueuesBackend(compat.BaseTaskBackend):
    task_class = QueuesTask
    supports_defer = True
    supports_async_task = True  # rq 3 runs an async job's coroutine with asyncio.run; rqworker --async on its loop
    supports_get_result = True
    supports_priority = True  # three bands of the queue: > 0, 0, < 0 (queues.enqueue's priority=)
    logs_one_line_per_job = True  # the backport's task_started/task_finished log lines are skipped (tasks/run.py)

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.declared_queues = tuple(params["QUEUES"]) if params.get("QUEUES") else None
        self.queues = set()  # the framework's own queue check is ours (validate_task): it names the queues
        self._checked: dict[str, Any] = {}  # OPTIONS validated at the first enqueue (_setting)

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
        settings = self.options if isinstance(self.options, dict) else {}  # not a dict: queues.E081
        if options.get("attempts") is None and settings.get(retries.MAX_ATTEMPTS) is not None:
            options["attempts"] = self._setting(retries.MAX_ATTEMPTS)
        backoff = task.backoff or (self._setting(retries.BACKOFF) if settings.get(retries.BACKOFF) else None)
        if backoff:
            marker[retries.BACKOFF_KEY] = backoff
            marker[retries.SEAL_KEY] = retries.seal(backoff)
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

    def _setting(self, key: str) -> Any:
        """``OPTIONS[key]`` validated (the checks' own validators), once per backend; ``InvalidTask`` when bad."""
        if key not in self._checked:
            where = f"TASKS[{self.alias!r}]['OPTIONS'][{key!r}]"
            try:
                self._checked[key] = retries.read_option(key, self.options[key], where)
            except retries.BadOption as exc:
                raise InvalidTask(f"{exc} {exc.hint}") from None
        return self._checked[key]

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
        if not isinstance(self.options, dict):
            yield checks.Error(
                f"{setting}['OPTIONS'] must be a dict, got {self.options!r}.",
                hint=f"Give a dict of {', '.join(OPTIONS)}, or leave OPTIONS out.",
                id="queues.E081",
            )
            return
        extra = [key for key in self.options if key not in OPTIONS]
        if extra:
            close = difflib.get_close_matches(str(extra[0]), OPTIONS, n=1)
            yield checks.Error(
                f"{setting}['OPTIONS'] has {', '.join(map(repr, extra))}, which the queues' backend does not read.",
                hint=(f"Did you mean {close[0]!r}? " if close else "")
                + f"OPTIONS takes {', '.join(OPTIONS)} (docs/tasks.md); a queue's timeout and its own attempts "
                "and backoff are the queue's options (OPTIMA_QUEUES or an app's queues.py).",
                id="queues.E081",
            )
        for key in OPTIONS:
            if key not in self.options:
                continue
            try:
                retries.read_option(key, self.options[key], f"{setting}['OPTIONS'][{key!r}]")
            except retries.BadOption as exc:
                yield checks.Error(str(exc), hint=exc.hint, id=exc.id)


def _queue_names() -> list[str] | None:
    """The declared queues, or None when the queue configuration is broken (the checks report it)."""
    try:
        return list(queue_names())
    except (QueuesError, ImproperlyConfigured):
        return None
