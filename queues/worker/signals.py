"""Signals the worker sends as a job moves through its life.

Receivers must be cheap and must not raise (a failing receiver is logged, never fails the job):
``queues.metrics`` counts with them; feature code may listen too. All carry ``queue`` (declared
name) and ``job`` (the rq Job).

- ``job_started``: an attempt begins.
- ``job_succeeded``: an attempt returned; ``duration`` in seconds.
- ``job_failed``: an attempt raised; ``exc_info``, ``duration`` seconds, ``will_retry`` (bool).
- ``job_retry_scheduled``: a retry was scheduled; ``delay`` seconds, ``attempt`` (the next one, 1-based).
- ``job_dead``: the job reached the dead letter; ``reason`` (``exhausted``, ``permanent``,
  ``timeout``, ``abandoned``).
"""

import logging

from django.dispatch import Signal

logger = logging.getLogger("queues.events")  # a documented logger name: kept when the module moved

job_started = Signal()
job_succeeded = Signal()
job_failed = Signal()
job_retry_scheduled = Signal()
job_dead = Signal()


def send(signal, **kwargs):
    """Send without ever letting a receiver's error reach the job."""
    for receiver, result in signal.send_robust(sender=None, **kwargs):
        if isinstance(result, Exception):
            logger.error("queues.events receiver %r failed: %r", receiver, result)
