"""The old path of the worker's signals (docs/lifecycle.md): they live in ``queues/events/signals.py``."""

from queues.events.signals import job_dead, job_failed, job_retry_scheduled, job_started, job_succeeded, send

__all__ = ["job_started", "job_succeeded", "job_failed", "job_retry_scheduled", "job_dead", "send"]
