"""The rq classes of this app: JSON jobs that import only declared functions, and queues bound to them.

Settings name them as ``queues.registry.OptimaJob`` / ``queues.registry.OptimaQueue`` (that module
re-exports them for users' settings).
"""
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from queues import rqcompat
from queues.catalog.queues import get_config


class OptimaJob(Job):
    """RQ's Job with JSON serialization (never pickle: whoever writes to Redis must not run code),
    which imports only declared jobs (queues/catalog/jobs.py) and carries its signature
    (queues/jobs/signing.py) in the hash field ``signature``.

    The worker refuses a job before it gets here (queues/jobs/gate.py); the guards below make sure that
    nothing else — rq's perform, a callback, a dashboard — imports a name that Redis supplied.
    """

    SIGNATURE_FIELD = "signature"

    def __init__(self, *args, **kwargs):
        if kwargs.get("serializer") is None:  # Job.fetch()/fetch_many() pass serializer=None explicitly
            kwargs["serializer"] = JSONSerializer
        super().__init__(*args, **kwargs)
        self.signature = ""

    def restore(self, raw_data):
        super().restore(raw_data)
        value = raw_data.get(b"signature") or raw_data.get("signature") or b""
        self.signature = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)

    def to_dict(self, include_meta=True, include_result=True):
        mapping = super().to_dict(include_meta=include_meta, include_result=include_result)
        if self.signature:
            mapping[self.SIGNATURE_FIELD] = self.signature
        return mapping

    @property
    def func(self):
        return _declared_or_refuse(self.func_name, "function", self.instance)

    @property
    def success_callback(self):
        return _declared_or_refuse(rqcompat.callback_names(self)[0], "success callback")

    @property
    def failure_callback(self):
        return _declared_or_refuse(rqcompat.callback_names(self)[1], "failure callback")

    @property
    def stopped_callback(self):
        return _declared_or_refuse(rqcompat.callback_names(self)[2], "stopped callback")


def _declared_or_refuse(name, what, instance=None):
    from queues.catalog import jobs as catalog
    from queues.exceptions import NotAJob

    if not name:
        return None
    if instance is not None:
        raise NotAJob(f"the job names a method {name!r} of an instance: only declared functions run")
    func = catalog.get(name)
    if func is None:
        raise NotAJob(f"its {what} {catalog.why_not(name)}")
    return func


class OptimaQueue(Queue):
    """RQ's Queue bound to JSON jobs. django-rq's panel builds it too (RQ_QUEUES' QUEUE_CLASS)."""

    job_class = OptimaJob

    def __init__(self, name="default", *args, **kwargs):
        kwargs["serializer"] = JSONSerializer
        kwargs["job_class"] = OptimaJob
        kwargs.pop("autocommit", None)
        kwargs.pop("commit_mode", None)
        super().__init__(name, *args, **kwargs)

    @property
    def config(self):
        """The declared QueueConfig of this queue."""
        return get_config(self.name)
