"""Queue names -> prefixed RQ queues.

A queue is declared once — in ``settings.OPTIMA_QUEUES`` or in an installed app's ``queues.py``
(``QUEUES = {"name": {...options}}``) or AppConfig attribute ``queues`` — and from then on exists
for enqueueing, for ``manage.py rqworker`` (no names: every declared queue), for django-rq's panel
and for ``/metrics``. ``queues/declarations.py`` merges the declarations (settings win over an
app's, key by key); this module turns a declared name into RQ objects.

Keys: rq 3.0 prefixes all of its own keys with ``RQ_KEY_PREFIX``, which ``QUEUE_PREFIX`` sets
(see docs/decisions.md). A queue named ``orders-sync`` lives at ``<prefix>:queue:orders-sync``.
"""
import redis
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from . import connection as _connection  # aliased: get_queue() and fetch_job() take a `connection` argument
from . import declarations, rqcompat
from .connection import rq_queues_setting  # noqa: F401  (public here since django-rq was wired from here)
from .declarations import QueueConfig, declared  # noqa: F401  (public names of this module)
from .exceptions import UnknownQueue


class OptimaJob(Job):
    """RQ's Job with JSON serialization (never pickle: whoever writes to Redis must not run code),
    which imports only declared jobs (queues/catalog.py) and carries its signature
    (queues/signing.py) in the hash field ``signature``.

    The worker refuses a job before it gets here (queues/gate.py); the guards below make sure that
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
    from . import catalog
    from .exceptions import NotAJob

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


def queue_names():
    return list(declared())


def get_config(name):
    try:
        return declared()[name]
    except KeyError:
        raise UnknownQueue(name, declared()) from None


def get_queue(name, connection=None):
    """The RQ queue declared as ``name``: prefixed, JSON, bound to the queues' connection."""
    config = get_config(name)
    if connection is None:
        connection = _connection.get_connection()
    return OptimaQueue(name, connection=connection, default_timeout=config.options["timeout"])


def fetch_job(job_id, connection=None):
    """The JSON job with this id, whatever its queue, or None when Redis no longer has it.

    Raises ``QueueUnavailable`` (masked URL) when Redis cannot be reached.
    """
    connection = connection or _connection.get_connection()
    try:
        if not OptimaJob.exists(job_id, connection=connection):
            return None
        return OptimaJob.fetch(job_id, connection=connection)
    except redis.RedisError as exc:
        raise _connection.unavailable(exc) from exc


def install_rq_queues():
    """Kept for old callers (bench/metrics_scrape.py); does nothing any more.

    settings.RQ_QUEUES is now ``queues.connection.RQQueuesSetting()``, derived from the declared
    queues on every read, and settings.RQ names this app's classes (optima_site/settings.py).
    """


def reset():
    """Forget the merged declarations and the cached Redis clients (both also reset themselves
    when a relevant setting changes)."""
    declarations.reset()
    _connection.reset()
