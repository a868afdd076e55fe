"""Where django-rq's view modules get the read-only, JSON-only pieces of ``readonly`` and ``stats``.

``install()`` rebinds, in django-rq's modules only, the names of the table below (the reasons are in
``readonly``'s docstring); the panel's URLconf and ``rqstats`` call it. Kept apart from both modules
so that neither needs the other's import for the table.
"""
import importlib

from queues.board.readonly import (
    REGISTRIES,
    JSONWorker,
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

_REBIND = {
    "django_rq.views": {**REGISTRIES, "get_queue_by_index": get_queue_by_index, "get_jobs": get_jobs, "Job": PanelJob,
                        "get_executions": get_executions,
                        "clean_worker_registry": clean_worker_registry, "Worker": JSONWorker,
                        "get_scheduler_by_index": get_scheduler_by_index},
    "django_rq.utils": {**REGISTRIES, "get_queue_by_index": get_queue_by_index, "Worker": JSONWorker,
                        "get_executions": get_executions,
                        "DjangoCronScheduler": ReadOnlyCronScheduler, "clean_worker_registry": clean_worker_registry,
                        "clean_registries": clean_registries},
    # stats.statistics takes django-rq's run_maintenance_tasks and never runs maintenance.
    "django_rq.stats_views": {"get_statistics": statistics},
    "django_rq.contrib.prometheus": {"get_queue": get_queue, "get_statistics": statistics},
    "django_rq.cron_views": {"get_queue_by_index": get_queue_by_index, "DjangoCronScheduler": ReadOnlyCronScheduler},
}


def install():
    """Rebind the names of the table in django-rq's view modules (idempotent)."""
    for module_name, names in _REBIND.items():
        module = importlib.import_module(module_name)
        for name, value in names.items():
            if hasattr(module, name):
                setattr(module, name, value)
