"""The panel's Redis: short timeouts, no retry of a timeout, and a deadline per request.

Why: a client with redis-py's default retry policy (a timeout is retried 10 times) against a Redis that
accepts TCP and never answers made a panel page take ~26 s and then answer 500.

How it is wired:

- ``guard`` (``access.py``) runs every panel view inside ``request_scope()``: one client per
  Redis config for the whole request (``QUEUE_BOARD_REDIS_TIMEOUT`` per connect / round trip, a
  dropped connection retried once, a timeout never, no health-check PING), and a deadline
  ``QUEUE_BOARD_DEADLINE`` seconds away: once it has passed, no further command is sent
  (``DeadlineRetry`` raises ``DeadlineExceeded``, a ``redis.TimeoutError``). The pages ask
  ``connection()`` for that client (``readonly.get_queue_by_index`` too).
- ``guard`` turns any ``redis.RedisError`` into the 503 page naming the masked Redis URL.

Worst case of one page: the deadline plus one command in flight (a new connection's connect,
handshake and reply: 3 x the timeout): 1.5 s + 3 x 0.5 s with the defaults. A Redis that never
answers costs one timeout (0.5 s). Queue-wide actions ("Requeue All", "Delete All", "Empty"),
which walk 200,000 jobs for longer than any page, run without the deadline and with the app's
``SOCKET_TIMEOUT`` per round trip (``request_scope(deadline=None, timeout=...)``).
"""

import contextlib
import contextvars
import time

import redis
from django.conf import settings
from django_rq import connection_utils as _rq_connection_utils
from django_rq.connection_utils import filter_connection_params

from queues import conf
from queues.conf import Problem
from queues.connection import servers
from queues.connection.clients import get_connection, mask_url, probe_client, queues_url
from queues.connection.djangorq import django_rq_config
from queues.connection.factory import ReconnectOnce, restrict

# Settings read here (seconds), with their defaults; docs/settings.md documents them.
DEFAULTS = {
    "QUEUE_BOARD_REDIS_TIMEOUT": 0.5,  # seconds each connect / round trip of a panel page may take
    "QUEUE_BOARD_DEADLINE": 1.5,  # seconds of Redis work one panel page may start commands within
}


def setting(name):
    return getattr(settings, name, DEFAULTS[name])


def validate():
    """Problems of the panel's Redis settings (E024)."""

    problems = []
    for name in DEFAULTS:
        value = setting(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 60:
            problems.append(
                Problem(
                    "queues.E024",
                    f"{name} must be a number of seconds > 0 (and at most 60), got {value!r}.",
                    f"Remove it for the default ({DEFAULTS[name]}), or set e.g. {DEFAULTS[name]}: a panel page must "
                    "answer within 3 s when Redis hangs (docs/settings.md).",
                )
            )
    return problems


class DeadlineExceeded(redis.TimeoutError):
    """The panel request's Redis deadline has passed: no further command is sent."""


class _Scope:
    def __init__(self, deadline, timeout):
        self.deadline = deadline  # time.monotonic() value, or None
        self.timeout = timeout
        self.clients = {}
        self.servers = set()  # the names of the servers whose clients this request took
        self.server = None  # the server ``connection()`` answers without a name (None: the default)

    def client_for(self, config, factory):

        key = repr(sorted(filter_connection_params(config).items()))
        client = self.clients.get(key)
        if client is None:
            client = self.clients[key] = bound(factory(config), self.timeout)
        return client

    def close(self):
        for client in self.clients.values():
            client.close()
        self.clients.clear()


_scope = contextvars.ContextVar("queues_board_redis_scope", default=None)


class DeadlineRetry(ReconnectOnce):
    """Retry a refused or dropped connection once (a pooled connection may be stale after a Redis
    restart), never a timeout; refuse to start a command once the request's deadline passed."""

    def call_with_retry(self, do, fail, *args, **kwargs):
        scope = _scope.get()
        if scope is not None and scope.deadline is not None and time.monotonic() > scope.deadline:
            raise DeadlineExceeded(f"the panel's Redis deadline ({setting('QUEUE_BOARD_DEADLINE')} s) has passed")
        return super().call_with_retry(do, fail, *args, **kwargs)


def bound(client, timeout):
    """``client`` changed, before it ever connects, to short timeouts and ``DeadlineRetry``."""
    return restrict(client, timeout=timeout, retry=DeadlineRetry())


@contextlib.contextmanager
def request_scope(deadline="default", timeout=None):
    """Run a panel request with bounded Redis clients (see the module docstring).

    ``deadline``: seconds from now, None for none, "default" for ``QUEUE_BOARD_DEADLINE``.
    ``timeout``: seconds per connect / round trip, None for ``QUEUE_BOARD_REDIS_TIMEOUT``.
    """
    if deadline == "default":
        deadline = setting("QUEUE_BOARD_DEADLINE")
    scope = _Scope(
        None if deadline is None else time.monotonic() + float(deadline),
        float(setting("QUEUE_BOARD_REDIS_TIMEOUT") if timeout is None else timeout),
    )
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)
        scope.close()


def long_running_timeout():
    """Seconds per round trip of a queue-wide action: the app's own ``SOCKET_TIMEOUT``."""
    return float(conf.options()["SOCKET_TIMEOUT"])


def connection(server=None):
    """The queues' Redis for panel code — of the server named ``server`` (QUEUES_REDIS_SERVERS; None: the
    request's, ``use_server``, else the default) —: the request's bounded client inside ``request_scope``, else
    the app's client."""
    scope = _scope.get()
    if scope is None:
        return get_connection(server)
    server = server or scope.server  # a page of one queue: its server (``use_server``)
    scope.servers.add(server or servers.DEFAULT)
    return scope.client_for(django_rq_config(server), _ORIGINAL)


def use_server(server):
    """Make ``server`` the request's Redis server: what ``connection()`` answers without a name from now on (a
    page of one queue reads that queue's server: ``lookups.known`` sets it from the URL's queue)."""
    scope = _scope.get()
    if scope is not None:
        scope.server = server


def queue_connection(name):
    """``connection()`` of the server the declared queue ``name`` lives on."""
    return connection(servers.of_queue(name))


def masked_url(server=None):
    return mask_url(servers.get(server).url if server else queues_url())


def failing_servers():
    """[(server name, masked URL)] of the servers this request used: the one, or those of them that do not
    answer a PING now (each with the request's short timeout), or all of them when each answers (a command
    error, or the deadline, rather than a server down). What a 503 page names."""
    scope = _scope.get()
    used = sorted(scope.servers) if scope is not None else [servers.DEFAULT]
    timeout = scope.timeout if scope is not None else float(setting("QUEUE_BOARD_REDIS_TIMEOUT"))
    down = [name for name in used if len(used) > 1 and not _answers(name, timeout)]
    return [(name, masked_url(name)) for name in down or used or [servers.DEFAULT]]


def _answers(server, timeout):
    client = probe_client("queues", timeout, server=server)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


# django-rq's factory builds a client from the connection config of ``settings.RQ_QUEUES`` (django_rq_config): the
# panel's client is built the same way, with the scope's timeouts and retry policy (``_Scope.client_for``).
_ORIGINAL = _rq_connection_utils.get_redis_connection
