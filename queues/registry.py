"""Queue names -> prefixed RQ queues.

A queue is declared once — in ``settings.OPTIMA_QUEUES`` or in an installed app's ``queues.py``
(``QUEUES = {"name": {...options}}``) or AppConfig attribute ``queues`` — and from then on exists
for enqueueing, for ``manage.py rqworker`` (no names: every declared queue), for django-rq's panel
and for ``/metrics``. Settings win over an app's declaration, key by key, so operators can tune a
feature's queue without touching its code.

Keys: rq 3.0 prefixes all of its own keys with ``RQ_KEY_PREFIX``, which ``QUEUE_PREFIX`` sets
(see docs/decisions.md). A queue named ``orders-sync`` lives at ``<prefix>:queue:orders-sync``.
"""
import importlib
import threading
from dataclasses import dataclass, field

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from rq import Queue
from rq.job import Job
from rq.serializers import JSONSerializer

from . import conf
from .exceptions import UnknownQueue

_lock = threading.Lock()
_declared = None  # name -> QueueConfig, built lazily


class OptimaJob(Job):
    """RQ's Job with JSON serialization (never pickle: whoever writes to Redis must not run code)."""

    def __init__(self, *args, **kwargs):
        if kwargs.get("serializer") is None:  # Job.fetch()/fetch_many() pass serializer=None explicitly
            kwargs["serializer"] = JSONSerializer
        super().__init__(*args, **kwargs)


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


@dataclass(frozen=True)
class QueueConfig:
    name: str
    options: dict = field(default_factory=dict)  # resolved: global defaults < queue options
    source: str = "settings"

    def __getitem__(self, key):
        return self.options[key]


def app_declarations():
    """(app label, {name: options}) for every installed app that declares queues."""
    found = []
    for app_config in apps.get_app_configs():
        decl = {}
        attr = getattr(app_config, "queues", None)
        if isinstance(attr, dict):
            decl.update(attr)
        try:
            module = importlib.import_module(f"{app_config.name}.queues")
        except ModuleNotFoundError as exc:
            if exc.name != f"{app_config.name}.queues":
                raise
            module = None
        if module is not None and isinstance(getattr(module, "QUEUES", None), dict):
            decl.update(module.QUEUES)
        if decl:
            found.append((app_config.label, decl))
    return found


def _build():
    problems = [p for p in conf.validate() if p.level == "error"]
    if problems:
        first = problems[0]
        raise ImproperlyConfigured(f"{first.msg} {first.hint} ({first.id}; run manage.py check for all)")
    global_opts = dict(conf.JOB_DEFAULTS)
    global_opts.update(getattr(settings, "OPTIMA_QUEUE_DEFAULTS", {}))
    merged = {}
    for label, decl in app_declarations():
        for name, opts in decl.items():
            merged.setdefault(name, ({}, label))[0].update(opts)
    for name, opts in getattr(settings, "OPTIMA_QUEUES", {}).items():
        merged.setdefault(name, ({}, "settings"))[0].update(opts)
    result = {}
    for name in sorted(merged):
        opts, source = merged[name]
        resolved = dict(global_opts)
        resolved.update(opts)
        result[name] = QueueConfig(name=name, options=resolved, source=source)
    return result


def declared():
    """{name: QueueConfig} of every declared queue, sorted by name."""
    global _declared
    if _declared is None:
        with _lock:
            if _declared is None:
                _declared = _build()
    return _declared


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
        from .connection import get_connection

        connection = get_connection()
    return OptimaQueue(name, connection=connection, default_timeout=config.options["timeout"])


def fetch_job(job_id, connection=None):
    """The JSON job with this id, whatever its queue, or None when Redis no longer has it.

    Raises ``QueueUnavailable`` (masked URL) when Redis cannot be reached.
    """
    import redis

    from .connection import get_connection, unavailable

    connection = connection or get_connection()
    try:
        if not OptimaJob.exists(job_id, connection=connection):
            return None
        return OptimaJob.fetch(job_id, connection=connection)
    except redis.RedisError as exc:
        raise unavailable(exc) from exc


def rq_queues_setting():
    """The RQ_QUEUES dict django-rq's commands and dashboard read, one entry per declared queue."""
    from .connection import django_rq_config

    base = django_rq_config()
    return {
        name: dict(base, DEFAULT_TIMEOUT=cfg.options["timeout"], QUEUE_CLASS="queues.registry.OptimaQueue",
                   SERIALIZER="rq.serializers.JSONSerializer")
        for name, cfg in declared().items()
    }


def install_rq_queues():
    """Point django-rq at the declared queues (it reads settings.RQ_QUEUES on every use)."""
    settings.RQ_QUEUES = rq_queues_setting()
    rq = dict(getattr(settings, "RQ", {}))
    rq.setdefault("JOB_CLASS", "queues.registry.OptimaJob")
    rq.setdefault("QUEUE_CLASS", "queues.registry.OptimaQueue")
    rq.setdefault("SCHEDULER_CLASS", "queues.scheduler.PrefixedScheduler")
    rq.setdefault("WORKER_CLASS", "queues.worker.OptimaWorker")
    settings.RQ = rq


def reset():
    global _declared
    with _lock:
        _declared = None
    from . import connection

    connection.reset()
