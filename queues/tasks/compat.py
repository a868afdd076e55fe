"""Every name this app takes from Django's Tasks API, in one module: the ``django-tasks`` backport (0.12,
Django 5.2) today.

On Django 6's own ``django.tasks`` (Python 3.12+, not testable here) only this module changes:

- the imports come from ``django.tasks`` (``Task``, ``TaskContext``, ``TaskResult``, ``TaskResultStatus``,
  ``TaskError``, ``task_backends``), ``django.tasks.backends.base`` (``BaseTaskBackend``),
  ``django.tasks.signals`` and ``django.tasks.exceptions``;
- ``TaskResultDoesNotExist`` is ``django.tasks.exceptions.TaskResultDoesNotExist`` there too, but
  ``InvalidTaskError`` is ``InvalidTask`` (Django 6.0 renamed it); ``TaskError.exception_class_path`` keeps its name;
- Django 6 has no ``django_tasks`` app: nothing goes into INSTALLED_APPS, and the backends' checks run
  from Django's own ``check_tasks``; the backport's logging receivers below (``BACKPORT_LOG_RECEIVERS``)
  are Django's ``django.tasks.signals.log_task_started`` / ``log_task_finished``, same names.
"""

from django_tasks import TaskContext, TaskResult, TaskResultStatus, task, task_backends
from django_tasks.backends.base import BaseTaskBackend
from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
from django_tasks.exceptions import InvalidTaskBackendError, InvalidTaskError, TaskResultDoesNotExist
from django_tasks.signals import (
    log_task_finished,
    log_task_started,
    task_enqueued,
    task_finished,
    task_started,
)
from django_tasks.utils import get_exception_traceback, get_module_path, normalize_json

# The backport's receivers that log every task_started / task_finished (queues/tasks/run.py quiets
# them for this backend's tasks: a worker already logs one line per job).
BACKPORT_LOG_RECEIVERS = {task_started: log_task_started, task_finished: log_task_finished}

__all__ = [
    "BACKPORT_LOG_RECEIVERS",
    "BaseTaskBackend",
    "InvalidTaskBackendError",
    "InvalidTaskError",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "get_exception_traceback",
    "get_module_path",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
