"""Redis clients: one for the queues, a separate one for cache-like traffic.

The queues' client serves enqueueing, the panel and metrics; workers build their own connection
from the same settings (RQ widens its socket timeout for blocking pops). The cache client
(``CACHE_REDIS_URL``, defaulting to the queues' URL) is always a distinct client with its own pool,
so a blocking worker command can never hold up a rate limiter or cache read.

django-rq reaches the same Redis through ``settings.RQ_QUEUES``: ``RQQueuesSetting`` derives it
from the declared queues on every read (``rq_queues_setting()``); ``validate_django_rq()`` checks
that settings.py wires django-rq that way (queues.E009, queues.E010).

With Sentinel (``QUEUES_REDIS_SENTINELS`` / ``CACHE_REDIS_SENTINELS``, queues/connection/failover.py;
queues/connection/sentinel.py) a client asks the sentinels for the master's address whenever it takes a
connection that is not connected, so after a failover the commands that follow the failed one reach
the promoted replica; the URL still gives the user, password, database and TLS, not the host.

Passwords never leave this module unmasked: ``mask_url`` is what logs, errors and pages show.
"""
import functools
import re
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import redis
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from queues import conf

from queues.catalog import queues as declarations

from queues.connection import failover
from queues.connection.sentinel import django_rq_sentinel_config, master_kwargs, sentinel_client
from queues.exceptions import QueueUnavailable

_lock = threading.Lock()


def mask_url(url):
    """The URL with any password replaced by ``***`` (user names stay: they help debugging)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable Redis URL>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{user}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def client_kwargs():
    """Timeouts applied to every client this app creates (seconds)."""
    opts = conf.options()
    return {
        "socket_timeout": opts["SOCKET_TIMEOUT"],
        "socket_connect_timeout": opts["SOCKET_CONNECT_TIMEOUT"],
        "health_check_interval": opts["HEALTH_CHECK_INTERVAL"],
    }


def queues_url():
    return getattr(settings, "QUEUES_REDIS_URL", "redis://127.0.0.1:6379/0")


def cache_url():
    return getattr(settings, "CACHE_REDIS_URL", None) or queues_url()


class _MaskedRedis(redis.Redis):
    """A Redis client whose repr never shows the password."""

    def __repr__(self):
        where = mask_url(getattr(self, "_optima_url", "?"))
        sentinel = getattr(self, "_optima_sentinel", None)
        if sentinel is not None:
            where = f"{where} via Sentinel master {sentinel.master!r}"
        return f"<{type(self).__name__} {where}>"


def _make_client(url, sentinel=None):
    if sentinel is not None:
        return sentinel_client(url, sentinel, _MaskedRedis, **client_kwargs())
    client = _MaskedRedis.from_url(url, **client_kwargs())
    client._optima_url = url
    return client


@functools.lru_cache(maxsize=None)
def _cached_client(kind, url, _opts, sentinel=None):
    return _make_client(url, sentinel)


def get_connection():
    """The queues' Redis client (lazy: nothing connects until the first command)."""
    return _cached_client("queues", queues_url(), tuple(sorted(client_kwargs().items())),
                          failover.sentinel_config("queues"))


def get_cache_connection():
    """The client for cache, rate limiters and other shared traffic: never the queues' pool."""
    return _cached_client("cache", cache_url(), tuple(sorted(client_kwargs().items())),
                          failover.sentinel_config("cache"))


def probe_client(kind="queues", timeout=0.5, **options):
    """A new client of ``kind``'s Redis ('queues' or 'cache') with ``timeout`` seconds per connect and
    round trip, through the sentinels when there are some: for probes (/healthz, checks, scrapes)
    that must not use the shared pool. The caller closes it."""
    url = queues_url() if kind == "queues" else cache_url()
    options = dict({"socket_timeout": timeout, "socket_connect_timeout": timeout}, **options)
    sentinel = failover.sentinel_config(kind)
    if sentinel is not None:
        return sentinel_client(url, sentinel, _MaskedRedis, **options)
    client = _MaskedRedis.from_url(url, **options)
    client._optima_url = url
    return client


def describe(kind="queues"):
    """Where ``kind``'s Redis is, for logs and messages: the masked URL, and the Sentinel master if any."""
    sentinel = failover.sentinel_config(kind)
    url = mask_url(queues_url() if kind == "queues" else cache_url())
    if sentinel is None:
        return url
    hosts = ",".join(f"{h}:{p}" for h, p in sentinel.sentinels)
    return f"Sentinel master {sentinel.master!r} via {hosts} ({url})"


def reset():
    _cached_client.cache_clear()


@receiver(setting_changed)
def _reset_on_setting_change(*, setting, **kwargs):
    # The cache key holds the URL and timeouts already; this only lets go of superseded clients.
    if setting.startswith(("OPTIMA_", "QUEUE", "CACHE_REDIS")):
        reset()
        failover.clear_caches()


def unavailable(exc, url=None):
    """A QueueUnavailable for a redis error, naming the masked URL and never the password."""
    where = mask_url(url) if url else describe("queues")
    reason = type(exc).__name__
    fix = "REDIS_URL is right"
    if not url and failover.sentinel_config("queues") is not None:
        fix = "REDIS_SENTINELS, REDIS_SENTINEL_MASTER and REDIS_URL (user, password, db) are right"
    return QueueUnavailable(f"Queue Redis at {where} is unavailable ({reason}). Check that it runs and that {fix}.")


def django_rq_config():
    """A django-rq connection config for the queues' Redis.

    HOST-style on purpose: django-rq passes client options (our timeouts) only for that form,
    not for 'URL' configs. With Sentinel, django-rq's SENTINELS form, with the same options.
    """
    sentinel = failover.sentinel_config("queues")
    if sentinel is not None:
        return django_rq_sentinel_config(queues_url(), sentinel, client_kwargs())
    parts = urlsplit(queues_url())
    db = parts.path.lstrip("/") or "0"
    cfg = {
        "HOST": parts.hostname or "127.0.0.1",
        "PORT": parts.port or 6379,
        "DB": int(db) if db.isdigit() else 0,
        "USERNAME": parts.username or None,
        "PASSWORD": parts.password,
        "SSL": parts.scheme == "rediss",
        "REDIS_CLIENT_KWARGS": client_kwargs(),
    }
    if parts.scheme == "rediss":
        # The URL's ssl_* query options (?ssl_ca_certs=/etc/optima/redis-ca.pem) reach workers too.
        tls = {k: v for k, v in master_kwargs(queues_url()).items() if k.startswith("ssl_")}
        cfg["SSL_CERT_REQS"] = tls.pop("ssl_cert_reqs", "required")
        cfg["REDIS_CLIENT_KWARGS"].update(tls)
    return cfg


def _rq_queue_entry(config, base):
    return dict(base, DEFAULT_TIMEOUT=config.options["timeout"], QUEUE_CLASS="queues.registry.OptimaQueue",
                SERIALIZER="rq.serializers.JSONSerializer")


def rq_queues_setting():
    """The RQ_QUEUES dict django-rq's commands and dashboard read, one entry per declared queue."""
    base = django_rq_config()
    return {name: _rq_queue_entry(config, base) for name, config in declarations.declared().items()}


class RQQueuesSetting(Mapping):
    """``settings.RQ_QUEUES``: ``rq_queues_setting()``, computed on every read.

    django-rq reads ``settings.RQ_QUEUES`` on each use, as a mapping. The declared queues depend on
    the installed apps, which are not loaded while settings.py runs, so the value cannot be a dict
    written there; computing it on each read (from the cached declarations) keeps it in step with
    ``override_settings`` too, where a dict written once at start-up would not.
    """

    def __getitem__(self, name):
        return _rq_queue_entry(declarations.declared()[name], django_rq_config())

    def __iter__(self):
        return iter(declarations.declared())

    def __len__(self):
        return len(declarations.declared())

    def __repr__(self):
        # Never the entries: they hold the Redis password (diffsettings and error pages show this).
        return f"{type(self).__name__}()"


try:
    from django.views.debug import SafeExceptionReporterFilter as _BaseFilter
except ImportError:  # pragma: no cover
    _BaseFilter = object


# scheme://user:password@ anywhere in a string: the password part (up to the last @ of the authority,
# as an unencoded @ in a password would leave it) is replaced.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)[^\s/]+@")
_MAX_DEPTH = 8  # containers nested deeper than this are not shown at all on an error page


def mask_urls_in(text):
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _URL_PASSWORD.sub(r"\g<head>***@", text)


class MaskingExceptionReporterFilter(_BaseFilter):
    """Django's filter, plus: no password or secret-looking value reaches an error page, in dev too.

    Django hides settings and ``request.META`` entries whose *name* looks secret (``hidden_settings``:
    API, AUTH, TOKEN, KEY, SECRET, PASS, SIGNATURE) and nothing else. This filter also masks:

    - the password of any URL inside a string value (``QUEUES_REDIS_URL``, a cache ``LOCATION``,
      ``DATABASE_URL`` in ``request.META`` or in a WSGI ``environ``);
    - in the traceback's local variables, whatever DEBUG says: a variable whose name looks secret,
      any dict entry whose key looks secret (a connection's ``settings_dict['PASSWORD']``), at any
      depth of dicts, lists, tuples and sets, and URL passwords in strings.

    Set ``DEFAULT_EXCEPTION_REPORTER_FILTER`` to this class.
    """

    def cleanse_setting(self, key, value):
        value = super().cleanse_setting(key, value)
        if isinstance(value, str):
            return mask_urls_in(value)
        return value

    def get_safe_request_meta(self, request):
        return {k: (mask_urls_in(v) if isinstance(v, str) else v)
                for k, v in super().get_safe_request_meta(request).items()}

    def get_traceback_frame_variables(self, request, tb_frame):
        return [(name, self.cleanse_variable(name, value, set(), 0))
                for name, value in super().get_traceback_frame_variables(request, tb_frame)]

    def _looks_secret(self, name):
        return isinstance(name, str) and bool(self.hidden_settings.search(name))

    def cleanse_variable(self, name, value, seen, depth):
        """``value`` as it may be shown: a copy with secrets masked (the frame's own objects untouched)."""
        if self._looks_secret(name):
            return self.cleansed_substitute
        try:
            # Only the exact type: isinstance() would evaluate a lazy object (request.user) to answer.
            kind = type(value)
            if issubclass(kind, str):
                return mask_urls_in(value)
            if not issubclass(kind, (Mapping, list, tuple, set, frozenset)):
                return value
        except Exception:  # pragma: no cover - type() and issubclass() of builtins do not raise
            return value
        if id(value) in seen:
            return "<recursion>"
        if depth >= _MAX_DEPTH:
            return f"<{type(value).__name__} nested deeper than {_MAX_DEPTH} levels: not shown>"
        seen = seen | {id(value)}
        try:
            if isinstance(value, Mapping):
                return {k: self.cleanse_variable(k, v, seen, depth + 1) for k, v in value.items()}
            items = [self.cleanse_variable("", v, seen, depth + 1) for v in value]
        except Exception as exc:  # a broken container must not break the error page
            return f"<{type(value).__name__} not shown: {type(exc).__name__} while reading it>"
        if isinstance(value, list):
            return items
        if isinstance(value, tuple):
            return tuple(items)
        return items  # a set's items as a list: masked values may be unhashable or collide


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
            problems.append(conf.Problem(
                "queues.E009", f"settings.RQ[{key!r}] is {value!r}, expected {expected!r}.",
                "django-rq builds jobs, queues, workers and schedulers from settings.RQ: without this app's "
                "classes jobs are pickled and failures are not retried. Set RQ as optima_site/settings.py does."))
    rq_queues = getattr(settings, "RQ_QUEUES", None)
    if not isinstance(rq_queues, RQQueuesSetting):
        got = "not set" if rq_queues is None else f"a {type(rq_queues).__name__}"
        problems.append(conf.Problem(
            "queues.E010", f"settings.RQ_QUEUES is {got}, expected queues.connection.RQQueuesSetting().",
            "Set RQ_QUEUES = RQQueuesSetting() (from queues.connection.clients) in settings.py: django-rq then sees "
            "exactly the declared queues. Declare queues in OPTIMA_QUEUES or an app's queues.py instead."))
    return problems
