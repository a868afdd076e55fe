"""Every Redis client this app builds itself, built here: timeouts, bounded retries, a masked password.

Each caller keeps its own policy and says it in arguments; what they share is built once:

=============================  ================================================  =====================
caller                         timeouts (seconds)                                retry
=============================  ================================================  =====================
the queues' and the cache's    ``SOCKET_TIMEOUT`` / ``SOCKET_CONNECT_TIMEOUT``,  redis-py's default
clients (``clients``)          a PING every ``HEALTH_CHECK_INTERVAL``
probes: /healthz, the          ``HEALTH_TIMEOUT``                                redis-py's default
eviction check (``info``)
a /metrics scrape (``store``)  ``METRICS_REDIS_TIMEOUT``                         ``ReconnectOnce``
the sign-in throttle           0.5, on a copy of the cache client's pool         ``ReconnectOnce``
a panel page (``bounded``)     ``QUEUE_BOARD_REDIS_TIMEOUT``, on django-rq's     ``DeadlineRetry``
                               client restricted in place                        (a ``ReconnectOnce``)
a worker's lifeline            at most 2, on a copy of the worker's pool         the worker's
=============================  ================================================  =====================

``make_client`` builds a client from a URL (through Sentinel when given a ``SentinelConfig``: the URL
then gives the user, password, database and TLS, the sentinels the address). ``copy_client`` builds
a client to the same server as another, with a pool of its own; ``restrict`` bounds a client someone
else built before it connects. A client built here shows ``mask_url(url)`` in its repr, never the
password; redis-py's own errors name the host and port only.
"""

from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from queues.connection.sentinel import sentinel_client


def mask_url(url):
    """The URL with every password replaced by ``***``: the authority's and any query parameter whose
    name, percent-decoded as redis-py decodes it, names a secret (``?password=``, ``?ssl_password=``,
    ``?pass%77ord=``, ``?passwd=``: ``masking.secret_name``). User names stay: they help debugging."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparseable Redis URL>"
    netloc = parts.netloc
    if password is not None:
        userinfo, _, host = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}:***@{host}"
    query = "&".join(_masked_param(param) for param in parts.query.split("&")) if parts.query else ""
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _masked_param(param):
    from queues.connection.masking import secret_name  # the one rule: a name that decodes to a secret's

    name, sep, _value = param.partition("=")
    return f"{name}=***" if sep and secret_name(name) else param


class _MaskedRedis(redis.Redis):
    """A Redis client whose repr never shows the password."""

    def __repr__(self):
        where = mask_url(getattr(self, "_optima_url", "?"))
        sentinel = getattr(self, "_optima_sentinel", None)
        if sentinel is not None:
            where = f"{where} via Sentinel master {sentinel.master!r}"
        return f"<{type(self).__name__} {where}>"


class ReconnectOnce(Retry):
    """Retry a refused or dropped connection once (a pooled connection may be stale after a Redis
    restart), never a timeout: a Redis that does not answer costs one timeout, not four."""

    def __init__(self):
        super().__init__(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))


def make_client(url, *, timeout, connect_timeout=None, health_check_interval=0, retry=None, sentinel=None):
    """A new client of the Redis at ``url`` (nothing connects until its first command).

    ``timeout``: seconds per round trip; ``connect_timeout``: seconds per connect (default
    ``timeout``); ``health_check_interval``: seconds an idle pooled connection waits before a PING
    checks it (0: never); ``retry``: a redis ``Retry`` (None: redis-py's default, 3 retries with
    backoff, timeouts included); ``sentinel``: a ``failover.SentinelConfig`` whose sentinels name
    the master, or None to connect to ``url``'s host.
    """
    options = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout if connect_timeout is None else connect_timeout,
        "health_check_interval": health_check_interval,
    }
    if retry is not None:
        options["retry"] = retry
    if sentinel is not None:
        client = sentinel_client(url, sentinel, _MaskedRedis, **options)
    else:
        client = _MaskedRedis.from_url(url, **options)
    client._optima_url = url
    client._optima_sentinel = sentinel
    return client


def _bound(kwargs, timeout, retry, health_check_interval):
    kwargs.update(socket_timeout=timeout, socket_connect_timeout=timeout)
    if health_check_interval is not None:
        kwargs["health_check_interval"] = health_check_interval
    if retry is not None:
        kwargs["retry"] = retry
    return kwargs


def copy_client(client, *, timeout, retry=None, health_check_interval=None):
    """A client to the same server as ``client`` (its class, credentials, database, TLS, and the same
    sentinels when it has some) with a pool of its own, so nothing done on it can block, or be
    blocked by, ``client``'s connections. ``timeout``: seconds per connect and round trip;
    ``retry`` and ``health_check_interval`` replace ``client``'s when given."""
    # rq's copy of the pool's settings leaves out redis-py's per-pool runtime state (rq rebuilds a
    # worker's connection in its work horse the same way). Imported here: settings.py imports this
    # package before Django is set up, and rq must not be imported then.
    from rq.connections import parse_connection

    client_class, connection_class, kwargs = parse_connection(client)
    kwargs = _bound(dict(kwargs), timeout, retry, health_check_interval)
    copy = client_class(connection_pool=redis.ConnectionPool(connection_class=connection_class, **kwargs))
    for name in ("_optima_url", "_optima_sentinel"):
        if hasattr(client, name):
            setattr(copy, name, getattr(client, name))
    return copy


def restrict(client, *, timeout, retry, health_check_interval=0):
    """``client`` itself, changed before it ever connects to ``timeout`` seconds per connect and round
    trip and the ``retry`` policy: for clients another library builds (django-rq's)."""
    _bound(client.connection_pool.connection_kwargs, timeout, None, health_check_interval)
    client.set_retry(retry)
    return client
