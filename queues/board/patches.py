"""Every name the panel rebinds inside django-rq's modules, in one table, and ``install()``.

What each replacement is for is in ``readonly``'s docstring (JSON only, nothing written on a GET),
``stats`` (the poison-proof dashboard counts) and ``bounded`` (the panel's Redis clients). The
rebinding happens in django-rq's modules only; rq, the workers and the schedulers are untouched.

``install()`` is called by the panel's URLconf (so at start-up: ``manage.py check``, ``runserver``
and the first request import it) and by ``manage.py rqstats``. A name that its django-rq module does
not have is never skipped: ``install()`` raises ``ImproperlyConfigured`` naming the module, the name
and the installed django-rq version. A django-rq upgrade that renames one would otherwise leave its
views unpatched (unpickling, writing on a GET) without a word; the fix is to read the new django-rq
and change the table (docs/decisions.md, "The panel denies by default").
"""

import importlib
from importlib.metadata import PackageNotFoundError, version

from django.core.exceptions import ImproperlyConfigured

from queues.board import bounded
from queues.board.access import panel_context
from queues.board.readers import JSONWorker
from queues.board.readonly import (
    REGISTRIES,
    PanelJob,
    ReadOnlyCronScheduler,
    clean_registries,
    clean_worker_registry,
    get_executions,
    get_jobs,
    get_queue,
    get_queue_by_index,
    get_scheduler_by_index,
)
from queues.board.stats import statistics

# rq 3.0's CanceledJobRegistry has no page in django-rq 4.2 (neither views nor utils import it); the
# panel's queue (readonly.ReadOnlyQueue) reads it read-only wherever rq code asks the queue for it.
_READ_ONLY_REGISTRIES = {name: cls for name, cls in REGISTRIES.items() if name != "CanceledJobRegistry"}
_FACTORY = {"get_redis_connection": bounded.get_redis_connection}

# django-rq module -> {name: what it becomes}. Checked against django-rq 4.2.0.
REBIND = {
    "django_rq.views": {
        **_READ_ONLY_REGISTRIES,
        "get_queue_by_index": get_queue_by_index,
        "get_jobs": get_jobs,
        "Job": PanelJob,
        "get_executions": get_executions,
        "clean_worker_registry": clean_worker_registry,
        "Worker": JSONWorker,
        "get_scheduler_by_index": get_scheduler_by_index,
        # One consistent header for a visitor no Django user is behind (access.panel_context).
        "each_context": panel_context,
    },
    "django_rq.utils": {
        **_READ_ONLY_REGISTRIES,
        "get_queue_by_index": get_queue_by_index,
        "Worker": JSONWorker,
        "get_executions": get_executions,
        "DjangoCronScheduler": ReadOnlyCronScheduler,
        "clean_worker_registry": clean_worker_registry,
        "clean_registries": clean_registries,
        **_FACTORY,
    },
    # stats.statistics takes django-rq's run_maintenance_tasks and never runs maintenance.
    "django_rq.stats_views": {"get_statistics": statistics, "each_context": panel_context},
    # Its collector counts through get_queue (4.2 no longer calls get_statistics there), and lists the
    # workers of the worker class of the settings (rq's reads, which raise for a poison worker set).
    "django_rq.contrib.prometheus": {"get_queue": get_queue, "get_worker_class": lambda: JSONWorker},
    "django_rq.cron_views": {
        "get_queue_by_index": get_queue_by_index,
        "DjangoCronScheduler": ReadOnlyCronScheduler,
        "each_context": panel_context,
    },
    # django-rq's client factory, where it is defined and where it was imported: bounded inside a panel request.
    "django_rq.connection_utils": _FACTORY,
    "django_rq.queues": _FACTORY,
    "django_rq.cron": _FACTORY,
}


def django_rq_version():
    try:
        return version("django-rq")
    except PackageNotFoundError:
        return "unknown"


def missing(table=None):
    """``[(module, name), ...]`` of the table's names that their django-rq module does not have."""
    table = REBIND if table is None else table
    return [
        (module_name, name)
        for module_name, names in table.items()
        for name in names
        if not hasattr(importlib.import_module(module_name), name)
    ]


def install(table=None):
    """Rebind the table's names in django-rq's modules (idempotent); ``ImproperlyConfigured`` when a
    module lacks one of them, before anything is rebound."""
    table = REBIND if table is None else table
    absent = missing(table)
    if absent:
        listed = ", ".join(f"{module}.{name}" for module, name in absent)
        raise ImproperlyConfigured(
            f"The queue panel rebinds names inside django-rq's modules, and django-rq {django_rq_version()} has "
            f"no {listed}. Its views would run unpatched (pickle, writes on a GET), so the panel refuses to "
            "start. Install the django-rq version of requirements.txt, or adapt queues/board/patches.py "
            "(REBIND) to this version."
        )
    for module_name, names in table.items():
        module = importlib.import_module(module_name)
        for name, value in names.items():
            setattr(module, name, value)
