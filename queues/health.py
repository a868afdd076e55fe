"""``GET /healthz``: each component's status, 200 when all are up, 503 naming the failing ones (an extra queue
server down: 200, "degraded", named; below).

Anonymous callers (load balancers) get the status of each component only. The details — Redis URLs
(password masked), the database vendor, the error class, the time taken — go to active staff users and
to a probe sending ``Authorization: Bearer <HEALTHZ_TOKEN>`` (compared in constant time; no token
configured means no probe gets details). The status code is the same for both.

Bounded in time even when Redis does not answer: each probe runs on a client with short
socket timeouts (``OPTIMA_QUEUES_OPTIONS['HEALTH_TIMEOUT']``, 0.5 s by default).

The queues' Redis also fails when its ``maxmemory-policy`` is ``allkeys-*`` (``"error":
"EvictionPolicy"``): it may delete waiting jobs (queues/connection/info.py, check queues.E070). The cache's
Redis may evict: only its PING counts.

Every Redis server of the queues is a component (issue 36, queues/connection/servers.py): the default one is
``queue_redis`` as before, each of ``QUEUES_REDIS_SERVERS`` is ``queue_redis:<name>``, probed the same way, so
the answer names the server that is down. An extra server that is down is named in ``failing`` with the status
``"degraded"`` and a 200: it stops only its own queues (the others' enqueues, pages and metrics go on, and its
enqueues wait in the outbox), so a load balancer reading the code must not take the web process out of service
for it. The database, the default server and the cache still answer 503.
"""

import hmac
import time

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.http import JsonResponse
from django.utils.cache import add_never_cache_headers, patch_vary_headers

from queues import conf
from queues.connection import info as redisinfo
from queues.connection import servers
from queues.connection.clients import cache_url, mask_url, probe_client, queues_url


def _probe_redis(kind, eviction=False, server=None):
    """PING (and, with ``eviction``, ``INFO memory`` in the same round trip): the queues' Redis is
    failing when its maxmemory-policy is ``allkeys-*`` (it may delete waiting jobs; queues/connection/info.py).
    A Redis that refuses INFO (an ACL without it) is judged by its PING alone. ``server``: which of the
    queues' servers (None: the default)."""
    timeout = conf.options()["HEALTH_TIMEOUT"]
    url = (servers.get(server).url if server else queues_url()) if kind == "queues" else cache_url()
    try:
        # Through the sentinels when there are some: after a failover the master is elsewhere.
        client = probe_client(kind, timeout, server=server)
    except (ValueError, ImproperlyConfigured) as exc:  # a malformed setting: the system checks name it
        return {"status": "error", "url": mask_url(url), "error": type(exc).__name__}
    try:
        if not eviction:
            client.ping()
            return {"status": "ok", "url": mask_url(url)}
        pipe = client.pipeline(transaction=False)
        pipe.ping()
        pipe.info("memory")
        pong, memory = pipe.execute(raise_on_error=False)
        if isinstance(pong, Exception):
            raise pong
        policy = None if isinstance(memory, Exception) else memory.get("maxmemory_policy")
        if redisinfo.evicts_any_key(policy):
            return {"status": "error", "url": mask_url(url), "error": "EvictionPolicy", "maxmemory_policy": policy}
        return {"status": "ok", "url": mask_url(url)}
    except redis.RedisError as exc:
        return {"status": "error", "url": mask_url(url), "error": type(exc).__name__}
    finally:
        client.close()


def _probe_database():
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"status": "ok", "vendor": connection.vendor}
    except Exception as exc:  # any driver error means "down"
        return {"status": "error", "vendor": connection.vendor, "error": type(exc).__name__}


def _bearer_token_matches(request):
    expected = getattr(settings, "HEALTHZ_TOKEN", "") or ""
    scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode(), expected.encode())


def _is_staff(request):
    try:
        user = request.user
        return bool(user.is_active and user.is_staff)
    except Exception:  # the session lives in the database, which may be the component that is down
        return False


def may_see_details(request):
    return _bearer_token_matches(request) or _is_staff(request)


def _other_servers():
    """The queues' servers but the default; none when QUEUES_REDIS_SERVERS is bad (the checks name it, and the
    default server's probe still answers)."""
    try:
        return [name for name in servers.names() if name != servers.DEFAULT]
    except ImproperlyConfigured:
        return []


def healthz(request):
    started = time.monotonic()
    components = {
        "database": _probe_database(),
        "queue_redis": _probe_redis("queues", eviction=True),
        **{f"queue_redis:{name}": _probe_redis("queues", eviction=True, server=name) for name in _other_servers()},
        "cache_redis": _probe_redis("cache"),
    }
    failing = [name for name, c in components.items() if c["status"] != "ok"]
    required = [name for name in failing if not name.startswith("queue_redis:")]  # an extra server: degraded
    body = {"status": "error" if required else "degraded" if failing else "ok", "failing": failing}
    if may_see_details(request):
        body["components"] = components
        body["seconds"] = round(time.monotonic() - started, 3)
    else:
        body["components"] = {name: {"status": c["status"]} for name, c in components.items()}
    response = JsonResponse(body, status=503 if required else 200)
    # The body depends on who asks: no shared cache may hand a detailed answer to someone else.
    patch_vary_headers(response, ("Authorization", "Cookie"))
    add_never_cache_headers(response)
    return response
