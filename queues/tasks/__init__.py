"""Django's Tasks API on the queues: ``TASKS = {"default": {"BACKEND": "queues.tasks.QueuesBackend", ...}}``.

- ``compat``: every import of the Tasks framework (the ``django-tasks`` backport today; what changes
  on Django 6's ``django.tasks``);
- ``backend``: ``QueuesBackend`` (validate, enqueue, get_result, check) and ``QueuesTask``, the Task
  class it builds, which declares itself a job (queues/catalog/jobs.py) and takes queue options;
- ``results``: a job in Redis or in the outbox -> ``TaskResult`` (status mapping, errors, worker ids);
- ``retries``: ``MAX_ATTEMPTS`` / ``BACKOFF`` (OPTIONS and ``using()``): validated, the backoff's path sealed
  into the job, and the worker's retry decision (queues/failures/retry.py) asking it;
- ``run``: in the worker, what runs a Task (its ``TaskContext``) and the framework's signals
  ``task_started`` / ``task_finished``, sent from the worker's own signals (queues/worker/signals.py).

``queues.tasks.QueuesBackend``, ``QueuesTask`` and ``QUEUE_OPTIONS`` are loaded on first use, so that
``import queues.tasks`` imports neither rq nor the framework. docs/tasks.md is the user's guide.
"""

from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings

from queues.conf import Problem

if TYPE_CHECKING:  # loaded on first use (below); type checkers read them here
    from queues.tasks.backend import QUEUE_OPTIONS, QueuesBackend, QueuesTask

__all__ = ["QueuesBackend", "QueuesTask", "QUEUE_OPTIONS"]

BACKEND = "queues.tasks.QueuesBackend"


def validate() -> list[Problem]:
    """queues.W082: ``TASKS`` names this backend but ``'django_tasks'`` is not installed, so the framework's
    checks, and with them the backend's own (queues.E080, E081, E083-E086), never run (tasks still enqueue and run).
    Reported by queues/checks.py, which runs whatever is installed."""
    tasks = getattr(settings, "TASKS", None)
    ours = (
        [alias for alias, params in tasks.items() if isinstance(params, dict) and params.get("BACKEND") == BACKEND]
        if isinstance(tasks, dict)
        else []
    )
    if not ours or apps.is_installed("django_tasks"):
        return []
    return [
        Problem(
            "queues.W082",
            f"TASKS[{ours[0]!r}] uses {BACKEND} but 'django_tasks' is not in INSTALLED_APPS: "
            "the Tasks backend's checks (queues.E080, E081, E083-E086) never run.",
            "Add 'django_tasks' to INSTALLED_APPS (tasks enqueue and run without it; its checks need it).",
            level="warning",
        )
    ]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from queues.tasks import backend  # on first use: importing queues.tasks loads neither rq nor the framework

        return getattr(backend, name)
    raise AttributeError(f"module 'queues.tasks' has no attribute {name!r}")
