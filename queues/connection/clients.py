"""Redis clients: one for the queues, a separate one for cache-like traffic, and probes.

The queues' client serves enqueueing, the panel and metrics; workers build their own connection
from the same settings (RQ widens its socket timeout for blocking pops). The cache client
(``CACHE_REDIS_URL``, defaulting to the queues' URL) is always a distinct client with its own pool,
so a blocking worker command can never hold up a rate limiter or cache read. Both are built by
``queues.connection.factory``, as every client of this app is.

With Sentinel (``QUEUES_REDIS_SENTINELS`` / ``CACHE_REDIS_SENTINELS``, queues/connection/failover.py;
queues/connection/sentinel.py) a client asks the sentinels for the master's address whenever it takes a
connection that is not connected, so after a failover the commands that follow the failed one reach
the promoted replica; the URL still gives the user, password, database and TLS, not the host.

django-rq's view of the same Redis is ``queues.connection.djangorq``; error pages are masked by
``queues.connection.masking``. Passwords never leave here unmasked: ``mask_url`` is what logs,
errors and pages show.
"""

import functools
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from queues import conf
from queues.connection import failover, servers
from queues.connection.factory import make_client, mask_url
from queues.exceptions import QueueUnavailable

if TYPE_CHECKING:
    import redis

__all__ = [
    "cache_url",
    "client_kwargs",
    "describe",
    "get_cache_connection",
    "get_connection",
    "mask_url",
    "probe_client",
    "queue_connection",
    "queues_url",
    "reset",
    "unavailable",
]


def client_kwargs():
    """Timeouts applied to every client this app creates (seconds)."""
    opts = conf.options()
    return {
        "socket_timeout": opts["SOCKET_TIMEOUT"],
        "socket_connect_timeout": opts["SOCKET_CONNECT_TIMEOUT"],
        "health_check_interval": opts["HEALTH_CHECK_INTERVAL"],
    }


def queues_url():
    """The default server's URL (``QUEUES_REDIS_URL``); a queue's own server: ``servers.get(name).url``."""
    return servers.default_url()


def cache_url():
    return getattr(settings, "CACHE_REDIS_URL", None) or queues_url()


def _url(kind):
    return queues_url() if kind == "queues" else cache_url()


@functools.cache
def _cached_client(kind, url, _opts, sentinel=None):
    opts = dict(_opts)
    return make_client(
        url,
        sentinel=sentinel,
        timeout=opts["socket_timeout"],
        connect_timeout=opts["socket_connect_timeout"],
        health_check_interval=opts["health_check_interval"],
    )


def get_connection(server: str | None = None) -> "redis.Redis":
    """The queues' Redis client (lazy: nothing connects until the first command): of the default server, or of
    the server named ``server`` (QUEUES_REDIS_SERVERS; queues/connection/servers.py)."""
    if server is None or server == servers.DEFAULT:
        return _cached_client(
            "queues", queues_url(), tuple(sorted(client_kwargs().items())), failover.sentinel_config("queues")
        )
    where = servers.get(server)
    return _cached_client("queues", where.url, tuple(sorted(client_kwargs().items())), where.sentinel)


def queue_connection(queue_name: str) -> "redis.Redis":
    """The client of the server the declared queue ``queue_name`` lives on (its ``"redis"`` option)."""
    return get_connection(servers.of_queue(queue_name))


def get_cache_connection() -> "redis.Redis":
    """The client for cache, rate limiters and other shared traffic: never the queues' pool."""
    return _cached_client(
        "cache", cache_url(), tuple(sorted(client_kwargs().items())), failover.sentinel_config("cache")
    )


def probe_client(kind="queues", timeout=0.5, *, server=None, **options):
    """A new client of ``kind``'s Redis ('queues' or 'cache'; for the queues, of the server named ``server``,
    default the default one) with ``timeout`` seconds per connect and round trip, through the sentinels
    when there are some: for probes (/healthz, checks, scrapes) that must not use the shared pool.
    ``options``: ``make_client``'s (``retry``, ...). The caller closes it."""
    url, sentinel = _where(kind, server)
    return make_client(url, sentinel=sentinel, timeout=timeout, **options)


def _where(kind, server):
    if kind == "queues" and server not in (None, servers.DEFAULT):
        found = servers.get(server)
        return found.url, found.sentinel
    return _url(kind), failover.sentinel_config(kind)


def describe(kind="queues", server=None):
    """Where ``kind``'s Redis is (for the queues, the server named ``server``, default the default one), for
    logs and messages: the masked URL, and the Sentinel master if any."""
    url, sentinel = _where(kind, server)
    url = mask_url(url)
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
        servers.clear_caches()


def unavailable(exc, url=None, *, connection=None):
    """A QueueUnavailable for a redis error, naming the masked URL and never the password: ``url``'s, or the
    server of ``connection`` (a client built here: its name, its sentinels), or the default server's."""
    server = servers.DEFAULT
    if url is None and connection is not None:
        server = _server_of(connection)
        if server is None:
            url = getattr(connection, "_optima_url", None)
    where = mask_url(url) if url else describe("queues", server=server)
    reason = type(exc).__name__
    fix = "REDIS_URL is right"
    if url is None and server != servers.DEFAULT:
        fix = f"REDIS_SERVERS[{server!r}] (setting QUEUES_REDIS_SERVERS) is right"
    elif url is None and failover.sentinel_config("queues") is not None:
        fix = "REDIS_SENTINELS, REDIS_SENTINEL_MASTER and REDIS_URL (user, password, db) are right"
    return QueueUnavailable(f"Queue Redis at {where} is unavailable ({reason}). Check that it runs and that {fix}.")


def _server_of(connection):
    """The name of the server ``connection`` (a client built here) reaches, or None."""
    found = (getattr(connection, "_optima_url", None), getattr(connection, "_optima_sentinel", None))
    return next((s.name for s in servers.servers().values() if (s.url, s.sentinel) == found), None)
