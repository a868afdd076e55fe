"""A Task's retries in the shape proposed for Django (django/new-features#142): ``MAX_ATTEMPTS`` and ``BACKOFF``.

- Where they are set: ``TASKS[alias]["OPTIONS"]`` (``MAX_ATTEMPTS``: an int >= 1; ``BACKOFF``: the dotted path of
  a callable ``(exception, task_result) -> seconds or None``), and per Task ``QueuesTask.using(max_attempts=...,
  backoff=...)`` (``backoff``: the callable or its dotted path). Precedence: ``using()``, then the backend's
  OPTIONS, then the queue's own ``attempts`` and ``backoff`` (an app's queues.py or ``OPTIMA_QUEUES``), then the
  global defaults. The same validators (``attempts_problem``, ``backoff_path``; ``read_option`` for OPTIONS)
  serve the system checks (queues.E083-E086), the first enqueue and ``using()``, so the messages match.
- What a job carries: the attempts as any ``attempts=`` (``meta["attempts_allowed"]``), and the backoff's dotted
  path in its task marker, ``meta["task"]["backoff"]``, never a pickled callable. The meta is not covered by
  the job's signature (queues/jobs/signing.py), and the worker imports only what the app declared: so the path
  is sealed with an HMAC under the signing keys (``meta["task"]["backoff_mac"]``), and a worker calls a backoff
  only when its seal verifies. A path sealed by the app is one of the app's backoffs; one planted in Redis is
  never imported.
- In the worker: ``queues/failures/retry.py`` decides a failed attempt. After the attempts, ``PermanentError``
  and ``RetryAfter`` (which win, as over the queue's backoff), it asks the job's own backoff, the function
  ``job_backoff`` below builds and installs there (``retry.install_job_backoff``): the Task's callable gets the
  exception and the attempt's ``TaskResult`` (status FAILED, ``errors`` with this attempt's last, ``attempts``
  counting it) and answers seconds (the retry waits that long) or None (no retry: the job is a dead letter,
  reason ``exhausted``, as any job out of attempts). A backoff that raises, answers anything else, or whose
  seal does not verify is logged (logger ``queues.retry``) and the queue's backoff applies.
"""

import hashlib
import hmac
import inspect
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from queues.failures import retry
from queues.jobs import signing
from queues.tasks import compat, results

if TYPE_CHECKING:
    from rq.job import Job

MAX_ATTEMPTS, BACKOFF = "MAX_ATTEMPTS", "BACKOFF"  # keys of TASKS[alias]["OPTIONS"]
BACKOFF_KEY, SEAL_KEY = "backoff", "backoff_mac"  # keys of the job's task marker (meta["task"])
_SEAL_PREFIX = b"optima-task-backoff-v1\0"  # never change it: the seals of jobs in Redis were made with it


class BadOption(ValueError):
    """A bad ``MAX_ATTEMPTS`` / ``BACKOFF``: the message names the value, ``hint`` the fix, ``id`` the check."""

    def __init__(self, message: str, hint: str, id: str) -> None:
        super().__init__(message)
        self.hint, self.id = hint, id


class BackoffFailed(Exception):
    """A Task's backoff that raised, named with its job and path (its own exception is the cause)."""


def attempts_problem(value: Any, where: str) -> BadOption | None:
    """None for an int >= 1, else what is wrong (queues.E083)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return None
    return BadOption(
        f"{where} must be an integer >= 1, got {value!r}.",
        "Give the number of runs in all, the first included (1: never retried).",
        "queues.E083",
    )


def path_of(func: Callable[..., Any]) -> str | None:
    """The dotted path that imports ``func`` back, or None (a lambda, a nested function, a partial)."""
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    path = f"{module}.{qualname}"
    try:
        return path if import_string(path) is func else None
    except ImportError:
        return None


def backoff_path(value: Any, where: str, *, callable_ok: bool) -> str:
    """The dotted path of the backoff ``value`` names; raises ``BadOption`` (queues.E084-E086) for one that is
    not a dotted path (nor, where ``callable_ok``, a module-level callable), does not import, or is not a
    callable taking ``(exception, task_result)``."""
    if callable(value) and not isinstance(value, str):
        path = path_of(value)
        if path is None or not callable_ok:
            hint = (
                f"Pass its dotted path instead: {path!r}."
                if path
                else "Define it at module level (a lambda, a nested function or a partial has no dotted path) "
                "and pass that function or its dotted path."
            )
            raise BadOption(f"{where} must be a dotted path of a callable, got {value!r}.", hint, "queues.E084")
        func: Any = value
    elif isinstance(value, str) and value.count(".") >= 1 and "" not in value.split("."):
        path = value
        try:
            func = import_string(value)
        except ImportError as exc:
            raise BadOption(
                f"{where} = {value!r} cannot be imported ({exc}).",
                "Name a module-level function as '<module>.<function>'.",
                "queues.E085",
            ) from None
    else:
        raise BadOption(
            f"{where} must be a dotted path of a callable, got {value!r}.",
            "Name a module-level function as '<module>.<function>', e.g. 'myapp.retries.linear'.",
            "queues.E084",
        )
    problem = BadOption(
        f"{where} = {path!r} is not a callable taking (exception, task_result): got {func!r}.",
        "Give a function `def backoff(exception, task_result)` that returns seconds, or None to stop retrying.",
        "queues.E086",
    )
    if not callable(func):
        raise problem
    try:
        inspect.signature(func).bind(None, None)
    except TypeError:
        raise problem from None
    except ValueError:  # no signature to read (some builtins): called as is
        pass
    return path


def _keys() -> tuple[bytes, ...]:
    """The signing keys (queues/jobs/signing.py): the first seals, every one verifies (a key rotation)."""
    keys: tuple[bytes, ...] = signing.keys()  # type: ignore[no-untyped-call]  # signing is not annotated
    return keys


def read_option(key: str, value: Any, where: str) -> Any:
    """``TASKS[alias]["OPTIONS"][key]`` as the backend uses it (``BACKOFF``: its dotted path); raises
    ``BadOption``. The backend's check and its first enqueue both call it."""
    if key == BACKOFF:
        return backoff_path(value, where, callable_ok=False)
    problem = attempts_problem(value, where)
    if problem is not None:
        raise problem
    return value


def seal(path: str) -> str:
    """The HMAC that vouches for a backoff path the app itself wrote into a job (see the module docstring)."""
    return hmac.new(_keys()[0], _SEAL_PREFIX + path.encode(), hashlib.sha256).hexdigest()


def is_sealed(path: str, mac: Any) -> bool:
    if not isinstance(mac, str) or not mac.isascii():
        return False
    message = _SEAL_PREFIX + path.encode()
    return any(hmac.compare_digest(hmac.new(key, message, hashlib.sha256).hexdigest(), mac) for key in _keys())


def failed_result(job: "Job", exc: BaseException) -> compat.TaskResult[Any]:
    """The TaskResult of the attempt of ``job`` that just failed with ``exc``: FAILED, this attempt's error last
    in ``errors``, its worker counted in ``worker_ids``. One read of the job's results stream."""
    alias = job.meta[results.TASK]["backend"]
    cls = type(exc)
    error = compat.TaskError(
        exception_class_path=f"{cls.__module__}.{cls.__qualname__}", traceback=compat.get_exception_traceback(exc)
    )
    return results.build(
        alias,
        results.task_of(alias, job),
        job.id,
        results.FAILED,
        args=job.args,
        kwargs=job.kwargs,
        enqueued_at=results.aware(job.enqueued_at or job.created_at),
        started_at=results.aware(job.started_at),
        finished_at=results.aware(job.ended_at),
        errors=[*results.errors_of(job, "started"), error],
        worker_ids=results.counted_workers(job, "started"),
    )


def job_backoff(job: "Job") -> Callable[[BaseException], float | None] | None:
    """The backoff a Task's job carries (``retry.policy_for`` asks for it), or None: no Redis read, no import
    until a failed attempt calls it."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    marker = meta.get(results.TASK)
    if not isinstance(marker, dict) or not isinstance(marker.get(BACKOFF_KEY), str):
        return None
    path, mac = marker[BACKOFF_KEY], marker.get(SEAL_KEY)

    def delay(exc: BaseException) -> float | None:
        if not is_sealed(path, mac):
            raise ValueError(f"job {job.id}: its backoff {path[:200]!r} is not sealed by this app: never imported")
        try:
            seconds = import_string(path)(exc, failed_result(job, exc))
        except Exception as error:  # noqa: BLE001 — the app's code: named, then retry.decide logs and falls back
            raise BackoffFailed(f"job {job.id}: backoff {path} raised {type(error).__name__}: {error}") from error
        if seconds is None:
            return None
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
            raise TypeError(f"job {job.id}: backoff {path} returned {seconds!r}, not seconds (a number >= 0) or None")
        if seconds < 0:
            raise ValueError(f"job {job.id}: backoff {path} returned {seconds!r} seconds, below 0")
        return float(seconds)

    return delay


retry.install_job_backoff(job_backoff)  # type: ignore[no-untyped-call]  # retry.py is not annotated
