"""django-rq's view of the queues' Redis: ``settings.RQ_QUEUES`` and the check of ``settings.RQ``.

django-rq reaches the same Redis as this app through ``settings.RQ_QUEUES``: ``RQQueuesSetting``
derives it from the declared queues on every read (``rq_queues_setting()``), with the client
timeouts of ``queues.connection.clients``, each queue's entry on the Redis server the queue lives on
(its ``"redis"`` option, queues/connection/servers.py): django-rq's ``get_queue(name)`` and its workers
then reach that server, and its ``get_worker`` refuses queues of two servers. ``validate_django_rq()``
checks that the project's settings wire django-rq that way (queues.E009, queues.E010).

The settings module imports ``RQQueuesSetting`` (as ``queues.connection.RQQueuesSetting``) before Django is
set up: this module imports neither rq nor the app registry.
"""

from collections.abc import Mapping

import redis
from django.conf import settings

from queues import conf
from queues.catalog import queues as declarations
from queues.connection import servers
from queues.connection.clients import client_kwargs
from queues.connection.sentinel import django_rq_sentinel_config, master_kwargs


def django_rq_config(server=None):
    """A django-rq connection config for the queues' Redis: the server named ``server`` (None: the default).

    HOST-style on purpose: django-rq passes client options (our timeouts) only for that form,
    not for 'URL' configs. With Sentinel, django-rq's SENTINELS form, with the same options.
    """
    where = servers.get(server)
    sentinel, url = where.sentinel, where.url
    if sentinel is not None:
        return django_rq_sentinel_config(url, sentinel, client_kwargs())
    # Read as redis-py reads it (as every other client is built from it): the user and password from the
    # authority or from ``?username=`` / ``?password=``, the db from the path or ``?db=``.
    try:
        parsed = redis.connection.parse_url(url)
    except ValueError:  # not a redis:// URL: make_client refuses it, with redis-py's message
        parsed = {}
    tls = url.startswith("rediss://")
    cfg = {
        "HOST": parsed.get("host") or "127.0.0.1",
        "PORT": parsed.get("port") or 6379,
        "DB": parsed.get("db", 0),
        "USERNAME": parsed.get("username"),
        "PASSWORD": parsed.get("password"),
        "SSL": tls,
        "REDIS_CLIENT_KWARGS": client_kwargs(),
    }
    if tls:
        # The URL's ssl_* query options (?ssl_ca_certs=/etc/optima/redis-ca.pem) reach workers too.
        tls_options = {k: v for k, v in master_kwargs(url).items() if k.startswith("ssl_")}
        cfg["SSL_CERT_REQS"] = tls_options.pop("ssl_cert_reqs", "required")
        cfg["REDIS_CLIENT_KWARGS"].update(tls_options)
    return cfg


def _rq_queue_entry(config, base):
    return dict(
        base,
        DEFAULT_TIMEOUT=config.options["timeout"],
        QUEUE_CLASS="queues.registry.OptimaQueue",
        SERIALIZER="rq.serializers.JSONSerializer",
    )


def rq_queues_setting():
    """The RQ_QUEUES dict django-rq's commands and dashboard read, one entry per declared queue."""
    bases = {}
    for config in declarations.declared().values():
        if config.server not in bases:
            bases[config.server] = django_rq_config(config.server)
    return {name: _rq_queue_entry(config, bases[config.server]) for name, config in declarations.declared().items()}


class RQQueuesSetting(Mapping):
    """``settings.RQ_QUEUES``: ``rq_queues_setting()``, computed on every read.

    django-rq reads ``settings.RQ_QUEUES`` on each use, as a mapping. The declared queues depend on
    the installed apps, which are not loaded while settings.py runs, so the value cannot be a dict
    written there; computing it on each read (from the cached declarations) keeps it in step with
    ``override_settings`` too, where a dict written once at start-up would not.
    """

    def __getitem__(self, name):
        config = declarations.declared()[name]
        return _rq_queue_entry(config, django_rq_config(config.server))

    def __iter__(self):
        return iter(declarations.declared())

    def __len__(self):
        return len(declarations.declared())

    def __repr__(self):
        # Never the entries: they hold the Redis password (diffsettings and error pages show this).
        return f"{type(self).__name__}()"


# What settings.RQ must name: django-rq builds every job, queue, worker and scheduler from these.
DJANGO_RQ_CLASSES = {
    "JOB_CLASS": "queues.registry.OptimaJob",
    "QUEUE_CLASS": "queues.registry.OptimaQueue",
    "SCHEDULER_CLASS": "queues.scheduler.PrefixedScheduler",
    "WORKER_CLASS": "queues.worker.OptimaWorker",
}


def validate_django_rq():
    """Problems of django-rq's wiring in settings: RQ's classes (E009) and RQ_QUEUES (E010)."""
    problems = []
    rq_setting = getattr(settings, "RQ", {})
    for key, expected in DJANGO_RQ_CLASSES.items():
        value = rq_setting.get(key) if isinstance(rq_setting, dict) else None
        if value != expected:
            problems.append(
                conf.Problem(
                    "queues.E009",
                    f"settings.RQ[{key!r}] is {value!r}, expected {expected!r}.",
                    "django-rq builds jobs, queues, workers and schedulers from settings.RQ: without this app's "
                    "classes jobs are pickled and failures are not retried. Set RQ = {'JOB_CLASS': "
                    "'queues.registry.OptimaJob', 'QUEUE_CLASS': 'queues.registry.OptimaQueue', 'SCHEDULER_CLASS': "
                    "'queues.scheduler.PrefixedScheduler', 'WORKER_CLASS': 'queues.worker.OptimaWorker'} in your "
                    "settings (docs/install.md).",
                )
            )
    rq_queues = getattr(settings, "RQ_QUEUES", None)
    if not isinstance(rq_queues, RQQueuesSetting):
        got = "not set" if rq_queues is None else f"a {type(rq_queues).__name__}"
        problems.append(
            conf.Problem(
                "queues.E010",
                f"settings.RQ_QUEUES is {got}, expected queues.connection.RQQueuesSetting().",
                "In your settings: `from queues.connection import RQQueuesSetting` and `RQ_QUEUES = RQQueuesSetting()` "
                "(it imports nothing of rq): django-rq then sees exactly the declared queues. Declare queues in "
                "OPTIMA_QUEUES or an app's queues.py instead.",
            )
        )
    return problems
