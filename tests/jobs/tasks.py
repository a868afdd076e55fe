"""Tasks of Django's Tasks API (``@task``) for tests/queues/tasks/test_tasks*.py: module-level, in a job module."""

import asyncio
import os

from django_tasks import task

from queues import PermanentError


@task
def add(a, b):
    return a + b


@task
def record(path, label):
    """Append ``label`` to the file ``path`` (the order a worker ran tasks in)."""
    with open(path, "a") as f:
        f.write(f"{label}\n")
    return label


@task
async def add_later(a, b):
    await asyncio.sleep(0.01)  # the coroutine's work: it awaits before it returns
    return a + b


@task(takes_context=True)
def attempt_number(context, fail_until):
    """Fails until attempt ``fail_until``, then returns the attempt (the TaskContext's)."""
    if context.attempt < fail_until:
        raise ValueError(f"attempt {context.attempt} fails")
    return {"attempt": context.attempt, "id": context.task_result.id, "workers": len(context.task_result.worker_ids)}


@task
def fail_permanently(message):
    raise PermanentError(message)


@task
def pid():
    return os.getpid()
