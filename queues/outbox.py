"""The transactional outbox (issue 12, item 1): being built. Until then: the write waits for the commit."""
from django.db import transaction


def stage(queue, job, when, *, explicit_id, lock_key):
    from .enqueueing import write_job

    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: write_job(queue, job, when, explicit_id=explicit_id, lock_key=lock_key))
    else:
        write_job(queue, job, when, explicit_id=explicit_id, lock_key=lock_key)


def relay_if_due(worker):
    """Called from the worker's tick (every couple of seconds): being built."""
