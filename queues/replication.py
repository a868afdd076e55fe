"""Waiting for replicas after an enqueue (``REDIS_WAIT_REPLICAS``; issue 12, item 2).

``acknowledged(queue)`` wraps the Redis write of an enqueue (``enqueueing.write_job``).
"""
import contextlib


@contextlib.contextmanager
def acknowledged(queue):
    """Yield the queue to write with; a no-op until ``REDIS_WAIT_REPLICAS`` is implemented."""
    yield queue
