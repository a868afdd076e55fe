"""Clients that find their master through Redis Sentinel (settings in queues/connection/failover.py).

A Sentinel-managed connection asks the sentinels for the master's address whenever it connects, so
after a failover the next connection reaches the promoted replica. The URL (``REDIS_URL``,
``CACHE_REDIS_URL``) still gives the user, password, database and TLS; its host and port are not
used. Three consumers: the app's clients (``queues.connection.factory``), django-rq's workers and dashboard
(``django_rq_sentinel_config``), and Django's cache (``CacheSentinelPool``).
"""

import redis
from redis.sentinel import Sentinel, SentinelConnectionPool

from queues.connection import failover


def master_kwargs(url):
    """What of ``url`` applies to a master found through Sentinel: user, password, db and TLS."""
    parsed = redis.connection.parse_url(url)
    kwargs = {k: v for k, v in parsed.items() if k in ("username", "password", "db") or k.startswith("ssl_")}
    if url.startswith("rediss://"):
        kwargs["ssl"] = True
    return kwargs


def sentinel_client(url, sentinel, redis_class, **options):
    """A client of the master ``sentinel`` (a failover.SentinelConfig) watches, with ``url``'s
    credentials, db and TLS (also used to reach the sentinels) and the client ``options`` (timeouts)."""
    conn = master_kwargs(url)
    sentinel_kwargs = {k: v for k, v in options.items() if k.startswith("socket_")}
    sentinel_kwargs.update({k: v for k, v in conn.items() if k.startswith("ssl")})
    manager = Sentinel(list(sentinel.sentinels), sentinel_kwargs=sentinel_kwargs, **conn, **options)
    return manager.master_for(sentinel.master, redis_class=redis_class)


def django_rq_sentinel_config(url, sentinel, options):
    """django-rq's SENTINELS-form connection config: ``url``'s credentials, db and TLS, the client
    ``options`` (timeouts) for the master's connections, and the socket timeouts for the sentinels'."""
    conn = master_kwargs(url)
    options = dict(options)
    socket_timeout = options["socket_timeout"]
    return {
        "SENTINELS": [list(address) for address in sentinel.sentinels],
        "MASTER_NAME": sentinel.master,
        "DB": conn.pop("db", 0),
        "PASSWORD": conn.pop("password", None),
        # username and TLS inside CONNECTION_KWARGS: django-rq drops a top-level USERNAME where it
        # filters connection params (filter_connection_params), CONNECTION_KWARGS survives.
        "SOCKET_TIMEOUT": options.pop("socket_timeout"),
        "CONNECTION_KWARGS": dict(options, **conn),
        "SENTINEL_KWARGS": {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": options["socket_connect_timeout"],
            **{k: v for k, v in conn.items() if k.startswith("ssl")},
        },
    }


class CacheSentinelPool(SentinelConnectionPool):
    """``CACHES['default']['OPTIONS']['pool_class']`` when ``CACHE_REDIS_SENTINELS`` is set: Django's
    RedisCache builds its pools with ``pool_class.from_url(LOCATION, **options)``; this one finds the
    master through the cache's sentinels instead of the URL's host."""

    @classmethod
    def from_url(cls, url, **options):
        sentinel = failover.sentinel_config("cache")
        if sentinel is None:
            return redis.ConnectionPool.from_url(url, **options)
        return sentinel_client(url, sentinel, redis.Redis, **options).connection_pool
