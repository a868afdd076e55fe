"""Django's Tasks API on the queues: ``TASKS = {"default": {"BACKEND": "queues.tasks.QueuesBackend", ...}}``.

- ``compat``: every import of the Tasks framework (the ``django-tasks`` backport today; what changes
  on Django 6's ``django.tasks``);
- ``backend``: ``QueuesBackend`` (validate, enqueue, get_result, check) and ``QueuesTask``, the Task
  class it builds, which declares itself a job (queues/catalog/jobs.py) and takes queue options;
- ``results``: a job in Redis or in the outbox -> ``TaskResult`` (status mapping, errors, worker ids);
- ``run``: in the worker, what runs a Task (its ``TaskContext``) and the framework's signals
  ``task_started`` / ``task_finished``, sent from the worker's own signals (queues/worker/signals.py).

``queues.tasks.QueuesBackend``, ``QueuesTask`` and ``QUEUE_OPTIONS`` are loaded on first use, so that
``import queues.tasks`` imports neither rq nor the framework. docs/tasks.md is the user's guide.
"""

__all__ = ["QueuesBackend", "QueuesTask", "QUEUE_OPTIONS"]


def __getattr__(name):
    if name in __all__:
        from queues.tasks import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'queues.tasks' has no attribute {name!r}")
