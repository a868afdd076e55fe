"""Signals the worker sends as a job moves through its life.

The worker sends them through its hooks (``hooks.py``: ``SignalsHook`` below, installed at the app's
ready). Receivers must be cheap and must not raise (a failing receiver is logged, never fails the job):
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

from queues.events.hooks import Hook

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


class SignalsHook(Hook):
    """The worker's hook points sent as the signals above, for feature code and ``queues.metrics``."""

    name = "signals"

    def before_process(self, job, queue):
        send(job_started, queue=queue, job=job)

    def after_success(self, job, queue, duration, carried):
        send(job_succeeded, queue=queue, job=job, duration=duration)

    def after_failure(self, job, queue, exc_info, duration, will_retry):
        send(job_failed, queue=queue, job=job, exc_info=exc_info, duration=duration, will_retry=will_retry)

    def after_retry(self, job, queue, *, attempt, delay, reason, duration=None, exc_info=None, exc_string=""):
        send(job_retry_scheduled, queue=queue, job=job, delay=float(delay), attempt=attempt + 1)

    def after_dead(self, job, queue, *, reason, duration=0.0, exc_info=None, exc_string=""):
        send(job_dead, queue=queue, job=job, reason=reason)
