"""``GET /healthz``: each component's status, 200 when all are up, 503 naming the failing ones.

Bounded in time even when Redis does not answer: each probe runs on a client with short
socket timeouts (``OPTIMA_QUEUES_OPTIONS['HEALTH_TIMEOUT']``, 0.5 s by default).
"""
import time

import redis
from django.db import connection
from django.http import JsonResponse

from . import conf
from .connection import cache_url, mask_url, queues_url


def _probe_redis(url):
    timeout = conf.options()["HEALTH_TIMEOUT"]
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
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


def healthz(request):
    started = time.monotonic()
    components = {
        "database": _probe_database(),
        "queue_redis": _probe_redis(queues_url()),
        "cache_redis": _probe_redis(cache_url()),
    }
    failing = [name for name, c in components.items() if c["status"] != "ok"]
    body = {
        "status": "ok" if not failing else "error",
        "failing": failing,
        "components": components,
        "seconds": round(time.monotonic() - started, 3),
    }
    return JsonResponse(body, status=503 if failing else 200)
