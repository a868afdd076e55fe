"""The worker class every ``manage.py rqworker`` runs (set as django-rq's WORKER_CLASS).

JSON-only: a job whose payload is not JSON never runs (whoever can write to Redis must not run
code in workers). The lifecycle (retries, dead letters, shutdown, Redis outages) extends this class.
"""
from rq import Worker
from rq.serializers import JSONSerializer

from .registry import OptimaJob, OptimaQueue


class OptimaWorker(Worker):
    queue_class = OptimaQueue
    job_class = OptimaJob

    def __init__(self, *args, **kwargs):
        kwargs["serializer"] = JSONSerializer
        kwargs["job_class"] = OptimaJob
        kwargs["queue_class"] = OptimaQueue
        super().__init__(*args, **kwargs)
