"""Declared jobs: the only functions a worker will import and call.

A function is a job when it carries ``@queues.job`` and lives in a *job module*: each installed
app's ``jobs`` module (a package's submodules included), autodiscovered when Django starts (as
``django.contrib.admin`` discovers ``admin`` modules and Celery's ``autodiscover_tasks`` finds
tasks), plus the modules named in the setting ``QUEUE_JOB_MODULES`` (environment variable of the
same name, comma-separated). A ``@task`` of Django's Tasks API whose backend is ours
(``queues.tasks.QueuesBackend``) declares itself here too (``declare_task``): the catalog maps the
Task, a frozen object, to the function it wraps, stored under the function's own path
``<module>.<qualname>``, the path a ``@queues.job`` of that function would store. A job in Redis naming
anything else — ``os.system``, ``builtins.eval``, a feature module's helper — is never imported: the worker
dead-letters it (``not_a_job``, queues/jobs/gate.py) and ``queues.enqueue`` refuses it (``InvalidJob``, naming
the module and why it is not a job module: most often an app missing from ``INSTALLED_APPS``).

This module imports nothing but the standard library at import time, so that a job module (and
bench/jobs.py, which plain RQ imports outside Django) can use the decorator anywhere.
"""

import importlib
import inspect
import logging
import pkgutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from queues.tasks.compat import Task

logger = logging.getLogger("queues")

_declared: dict[str, Callable[..., Any]] = {}  # dotted path -> function, as the decorator saw it
_call_only: set[str] = set()  # dotted paths declared @queues.job(enqueue_call_only=True)
_tasks: dict[str, "Task[Any, Any]"] = {}  # dotted path -> the Task (queues/tasks/) first declared for it
_task_types: set[type] = set()  # the classes of declared Tasks (``unwrap`` knows them without importing django_tasks)
_job_modules: tuple[str, ...] | None = None  # tuple of module names once discovered; None before
MARK = "__optima_job__"
CALL_ONLY_MARK = "__optima_enqueue_call_only__"

# The keyword options of ``queues.enqueue(name, func, *args, <options>, **kwargs)``: every other
# keyword goes to the job. The one list of them, options to come included, so that a new option
# never silently takes a keyword away from an existing job: ``@queues.job`` refuses, when it
# decorates, a job with a parameter of one of these names (rename it, or declare the job
# ``enqueue_call_only`` and pass its arguments explicitly with ``queues.enqueue_call``).
# ``durable``, ``limit_key`` and ``limit_concurrency`` are reserved for issue 12 (outbox, fairness):
# until ``enqueue`` takes them, it refuses them instead of handing them to the job.
ENQUEUE_OPTIONS = (
    "attempts",
    "timeout",
    "job_id",
    "delay",
    "at",
    "unique",
    "durable",
    "limit_key",
    "limit_concurrency",
    "priority",
    "max_run_seconds",
    "debounce_key",
    "debounce_seconds",
    "debounce_max_seconds",
    "throttle_key",
    "throttle_seconds",
    "limit_rate",  # issue 35: queues/producer/rates.py
)


F = TypeVar("F", bound=Callable[..., Any])


@overload
def job(func: F, *, enqueue_call_only: bool = False) -> F: ...
@overload
def job(func: None = None, *, enqueue_call_only: bool = False) -> Callable[[F], F]: ...


def job(func: F | None = None, *, enqueue_call_only: bool = False) -> F | Callable[[F], F]:
    """Declare ``func`` a job: ``@queues.job`` (or ``@queues.job()``). Returns ``func`` itself,
    unchanged: it can still be called directly, and by plain RQ.

    A job may not have a parameter named like an option of ``queues.enqueue`` (``ENQUEUE_OPTIONS``):
    ``enqueue`` would take the keyword as its option and never pass it on. Rename the parameter, or
    declare ``@queues.job(enqueue_call_only=True)``: the job is then enqueued only with
    ``queues.enqueue_call(name, func, args, kwargs)`` (``queues.enqueue`` refuses it)."""
    if func is None:
        return lambda f: job(f, enqueue_call_only=enqueue_call_only)
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", "")
    if not callable(func) or not module or not qualname or "." in qualname or "<" in qualname:
        raise TypeError(
            f"@queues.job: {func!r} is not a module-level function; workers import jobs by "
            "dotted path, so lambdas, methods and nested functions cannot be jobs."
        )
    path = f"{module}.{qualname}"
    clashes = [] if enqueue_call_only else option_parameters(func)
    if clashes:
        names = ", ".join(repr(n) for n in clashes)
        raise TypeError(
            f"@queues.job: {path} has a parameter named {names}, like an option of queues.enqueue "
            f"({', '.join(ENQUEUE_OPTIONS)}): queues.enqueue would take that keyword as its option and never "
            f"pass it to the job. Rename the parameter (and its callers' keywords), "
            "or declare the job @queues.job(enqueue_call_only=True) and enqueue it with "
            "queues.enqueue_call(name, func, args=[...], kwargs={...})."
        )
    setattr(func, MARK, True)
    if enqueue_call_only:
        setattr(func, CALL_ONLY_MARK, True)
        _call_only.add(path)
    else:
        _call_only.discard(path)  # a module imported again, its job declared differently
    _declared[path] = func
    _verdicts.clear()
    return func


def declare_task(task: "Task[Any, Any]", runner: Callable[..., Any]) -> str:
    """Declare the Task ``task`` a job: its function's path runs ``runner`` (the function itself, or
    the wrapper that hands it a TaskContext: queues/tasks/run.py). Whether it is a job still depends
    on its module (``is_declared``): a Task outside a job module is refused at enqueue and by the gate,
    never here, at decoration time (the module may be a URLconf's import). A Task built again by
    ``task.using(...)`` keeps the first declaration. Returns the path."""
    func = task.func
    path = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', '')}"
    known = _tasks.get(path)
    if known is not None and known.func is func:
        return path
    _tasks[path] = task
    _task_types.add(type(task))
    _declared[path] = runner
    # Task.enqueue passes every keyword to the function; queues.enqueue of the same function could not.
    (_call_only.add if option_parameters(func) else _call_only.discard)(path)
    _verdicts.clear()
    return path


def task_of(path: str | None) -> "Task[Any, Any] | None":
    """The declared Task whose function ``path`` names (in a job module), or None. Imports nothing."""
    return _tasks.get(path) if is_declared(path) and path in _tasks else None


def unwrap(obj):
    """The function of a declared Task (``obj`` an instance of a Task class declared here), else ``obj``."""
    return obj.func if type(obj) in _task_types else obj


def option_parameters(func):
    """The parameters of ``func`` that a caller could pass by keyword and that are named like an
    option of ``queues.enqueue``, in signature order. ``*args``, ``**kwargs`` and positional-only
    parameters cannot clash: nothing reaches them by that name."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature (a C builtin): nothing to check
        return []
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in parameters if p.kind in keyword and p.name in ENQUEUE_OPTIONS]


def enqueue_call_only(func):
    """True when ``func`` (a function or its dotted path) was declared
    ``@queues.job(enqueue_call_only=True)``. Imports nothing."""
    if isinstance(func, str):
        return func in _call_only
    return getattr(func, CALL_ONLY_MARK, False) is True


def job_modules():
    """The job modules (names), discovering them on first use."""
    if _job_modules is None:
        autodiscover()
    return _job_modules


def forget_discovery():
    """Discover the job modules again on their next use (``queues.apps.forget_job_modules`` calls it when
    ``INSTALLED_APPS`` or ``QUEUE_JOB_MODULES`` change: ``override_settings``, at its start and at its end)."""
    global _job_modules
    _job_modules = None
    _verdicts.clear()


def configured_modules():
    """The names from the setting ``QUEUE_JOB_MODULES`` (a list, or a comma-separated string)."""
    # Django at call time: a job module, or bench/jobs.py outside Django, imports this one (docstring).
    from django.conf import settings

    value = getattr(settings, "QUEUE_JOB_MODULES", ()) or ()
    if isinstance(value, str):
        value = value.split(",")
    return tuple(name.strip() for name in value if isinstance(name, str) and name.strip())


def autodiscover():
    """Import every installed app's ``jobs`` module and every module of ``QUEUE_JOB_MODULES``.
    An app without a ``jobs`` module is fine; an import error inside one is raised (a worker must
    not start with half of its jobs). Idempotent."""
    global _job_modules
    # Django at call time: a job module, or bench/jobs.py outside Django, imports this one (docstring).
    from django.apps import apps
    from django.utils.module_loading import module_has_submodule

    found = []
    for app_config in apps.get_app_configs():
        if module_has_submodule(app_config.module, "jobs"):
            found.append(f"{app_config.name}.jobs")
    found.extend(name for name in configured_modules() if name not in found)
    found.extend(name for name in _app_modules if name not in found)
    for name in found:
        importlib.import_module(name)
        _import_submodules(name)
    _job_modules = tuple(found)
    _verdicts.clear()
    return _job_modules


_app_modules: list[str] = []  # the app's own job modules, named by its wiring (queues/apps.py)


def add_app_module(name):
    """Make the module ``name`` (a dotted name, imported at the discovery) a job module of the app itself: the
    jobs the app enqueues on its own account (a chain's next step: queues/workflows/steps.py). Named by the
    app's wiring, which sits above every room: this module imports nothing of it."""
    global _job_modules
    if name not in _app_modules:
        _app_modules.append(name)
        _job_modules = None  # discovered again, with it
        _verdicts.clear()


def _import_submodules(name):
    """A job module that is a package: its submodules are job modules too; import them all now,
    before any job runs (and before a worker forks, so horses share them)."""
    module = importlib.import_module(name)
    for info in pkgutil.walk_packages(getattr(module, "__path__", ()) or (), prefix=f"{name}."):
        importlib.import_module(info.name)


def in_job_module(path):
    module = path.rpartition(".")[0]
    return any(module == name or module.startswith(name + ".") for name in job_modules())


# path -> is_declared(path), per enqueue a dict lookup; emptied when a job is declared
_verdicts: dict[str, bool] = {}


def is_declared(path):
    """True when ``path`` names a declared job: decorated, in a job module. Imports nothing."""
    verdict = _verdicts.get(path) if isinstance(path, str) else False
    if verdict is None:
        verdict = _verdicts[path] = path in _declared and in_job_module(path)
    return verdict


def get(path):
    """The declared function ``path`` names, or None. Imports nothing."""
    return _declared[path] if is_declared(path) else None


def declared():
    """{dotted path: function} of every declared job."""
    job_modules()
    return {path: func for path, func in _declared.items() if in_job_module(path)}


def why_not(path):
    """How to make ``path`` a job (for InvalidJob and the dead-letter message)."""
    module = path.rpartition(".")[0] if isinstance(path, str) else ""
    if isinstance(path, str) and path in _tasks:
        return (
            f"{path!r} is a @task of the queues' Tasks backend but {module!r} is not a job module: move it "
            f"into an app's jobs.py, or add {module!r} to the setting QUEUE_JOB_MODULES."
        )
    if isinstance(path, str) and path in _declared:
        return (
            f"{path!r} carries @queues.job but {module!r} is not a job module: move it into an app's "
            f"jobs.py, or add {module!r} to the setting QUEUE_JOB_MODULES."
        )
    return (
        f"{path!r} is not a declared job: decorate a module-level function of an app's jobs.py (or of a "
        f"module named in QUEUE_JOB_MODULES) with @queues.job; {_where(path, module)}"
    )


def _where(path, module):
    """Why ``module`` declares no ``path``: the newcomer's usual slip is an app never added to INSTALLED_APPS."""
    if not module:
        return "give the job's dotted path, <module>.<function>."
    if in_job_module(path):
        return f"{module!r} is a job module, but it declares no {path.rpartition('.')[2]!r}."
    app = module.rpartition(".jobs")[0] if module.endswith(".jobs") or ".jobs." in module else ""
    if app and _installed_app_of(module) is None:
        return (
            f"{module!r} was never loaded: no app in INSTALLED_APPS contains it (add {app!r} to INSTALLED_APPS: "
            "its jobs.py is found at start-up) and QUEUE_JOB_MODULES does not name it."
        )
    return f"{module!r} is neither an installed app's jobs module nor named in QUEUE_JOB_MODULES."


def _installed_app_of(module):
    """The installed app containing ``module``, or None. Reads Django's registry only if Django loaded it
    (always, when a job is enqueued or run); imports nothing: the gate calls this with hostile names."""
    apps = getattr(sys.modules.get("django.apps"), "apps", None)
    if apps is None or not apps.ready:
        return None
    return apps.get_containing_app_config(module)


def validate():
    """queues.E025: a module of QUEUE_JOB_MODULES cannot be imported (its jobs would never run)."""
    from queues.conf import Problem  # conf imports Django: at call time, as above

    problems = []
    for name in configured_modules():
        try:
            importlib.import_module(name)
        except ImportError as exc:
            problems.append(
                Problem(
                    "queues.E025",
                    f"QUEUE_JOB_MODULES names {name!r}, which cannot be imported ({exc}).",
                    "Give importable module names, comma-separated, e.g. "
                    "QUEUE_JOB_MODULES=features.legacy.tasks; an app's jobs.py needs no entry.",
                )
            )
    return problems
