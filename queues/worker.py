"""The worker class every ``manage.py rqworker`` runs (set as django-rq's WORKER_CLASS).

Composed from one mixin per concern, each in its own module:

- ``queues.retry.RetryMixin``: attempts, backoff, RetryAfter, PermanentError, dead letters.
- ``queues.resilience.ResilienceMixin``: at-least-once (abandoned jobs), graceful shutdown with a
  grace period, surviving Redis outages.
- ``queues.pause.PauseMixin``: skipping paused queues.

JSON-only: a job whose payload is not JSON never runs (whoever can write to Redis must not run
code in workers).
"""
from rq import Worker
from rq.serializers import JSONSerializer


from .pause import PauseMixin
from .registry import OptimaJob, OptimaQueue
from .resilience import ResilienceMixin
from .retry import RetryMixin


class OptimaWorker(ResilienceMixin, RetryMixin, PauseMixin, Worker):
    queue_class = OptimaQueue
    job_class = OptimaJob

    def __init__(self, *args, **kwargs):
        kwargs["serializer"] = JSONSerializer
        kwargs["job_class"] = OptimaJob
        kwargs["queue_class"] = OptimaQueue
        super().__init__(*args, **kwargs)
