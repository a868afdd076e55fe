"""Failed sign-ins throttled per client address: the queue panel's basic auth and the admin login.

Both count into one window per address (an attacker gets no second budget by switching forms):
at most ``QUEUE_LOGIN_FAILURES`` failures (``limits`` syntax, default ``10/minute``); past that,
every attempt from the address answers 429 with ``Retry-After`` — without its credentials being
checked — until the moving window has room again. A successful sign-in does not clear the count
(one valid account must not buy unlimited guesses at another). Each failure is logged (logger
``queues.board.throttle``, WARNING) and audited (action ``login_failed``); a refused attempt is logged.

The window lives in the cache Redis (``queues.connection.clients.get_cache_connection()``: never the
queues' pool), through a copy of its pool bounded like the panel's clients (0.5 s per round trip,
no retry of a timeout), under ``<prefix>:optima:throttle``. When that Redis fails the throttle
lets the attempt through and logs an ERROR: a Redis outage must not lock every operator out.

The client address is ``REMOTE_ADDR``; behind reverse proxies named in ``QUEUE_TRUSTED_PROXIES``
(addresses or networks, a list or a comma-separated string) it is the right-most address of
``X-Forwarded-For`` that is not a trusted proxy — the left part of that header is whatever the
client sent.
"""

import functools
import ipaddress
import math
import time

import redis
from django.conf import settings
from django.shortcuts import render
from limits import parse
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter

from queues import audit, conf
from queues.conf import Problem
from queues.connection.clients import cache_url, get_cache_connection
from queues.connection.factory import ReconnectOnce, copy_client
from queues.logsafe import get_logger

logger = get_logger("queues.throttle")  # a documented logger name: kept when the module moved

DEFAULTS = {
    "QUEUE_LOGIN_FAILURES": "10/minute",  # failed sign-ins per client address per window (limits syntax)
    "QUEUE_TRUSTED_PROXIES": (),  # reverse proxies whose X-Forwarded-For is believed (IPs or networks)
}
REDIS_TIMEOUT = 0.5  # seconds per round trip to the cache Redis on the sign-in path
MAX_ADDRESS = 100  # characters of a forwarded address kept (it keys a Redis entry)


def setting(name):
    return getattr(settings, name, DEFAULTS[name])


# --- settings and their checks ----------------------------------------------------------------


def _proxy_entries():
    value = setting("QUEUE_TRUSTED_PROXIES") or ()
    if isinstance(value, str):
        value = value.split(",")
    return [str(v).strip() for v in value if str(v).strip()]


def validate():
    """Problems of the throttle's settings (E022, E023): the same messages in checks and at use."""
    problems = []
    limit = setting("QUEUE_LOGIN_FAILURES")
    try:
        parse(limit)
    except (ValueError, TypeError):
        problems.append(
            Problem(
                "queues.E022",
                f"QUEUE_LOGIN_FAILURES must be a rate like '10/minute', got {limit!r}.",
                "Use the limits library's syntax: '<count>/<second|minute|hour|day>', e.g. '10/minute' (the default).",
            )
        )
    for entry in _proxy_entries():
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            problems.append(
                Problem(
                    "queues.E023",
                    f"QUEUE_TRUSTED_PROXIES lists {entry!r}, which is not an IP address or network.",
                    "List the reverse proxies' addresses or networks, comma-separated: '10.0.0.5,10.1.0.0/16'.",
                )
            )
    return problems


def trusted_proxies():
    networks = []
    for entry in _proxy_entries():
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue  # reported by queues.E023
    return networks


def _is_trusted(address, networks):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in networks)


def client_address(request):
    """The address failures are counted against (see the module docstring)."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    networks = trusted_proxies()
    if not networks or not _is_trusted(remote, networks):
        return remote
    hops = [h.strip() for h in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
    for hop in reversed(hops):
        if not _is_trusted(hop, networks):
            return hop[:MAX_ADDRESS]
    return (hops[0] if hops else remote)[:MAX_ADDRESS]


# --- the window ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _storage(_url, _timeout):

    client = copy_client(get_cache_connection(), timeout=_timeout, retry=ReconnectOnce(), health_check_interval=0)
    return RedisStorage("redis://", connection_pool=client.connection_pool, key_prefix=conf.app_key("throttle"))


def _limiter():

    storage = _storage(cache_url(), REDIS_TIMEOUT)
    return MovingWindowRateLimiter(storage)


def _item():
    try:
        return parse(setting("QUEUE_LOGIN_FAILURES"))
    except (ValueError, TypeError):
        return parse(DEFAULTS["QUEUE_LOGIN_FAILURES"])  # queues.E022 reports it


def retry_after(request):
    """Seconds this request's address must wait before its next attempt (0: it may try now)."""
    address = client_address(request)
    item = _item()
    try:
        limiter = _limiter()
        if limiter.test(item, address):
            return 0
        stats = limiter.get_window_stats(item, address)
    except redis.RedisError as exc:
        logger.error(
            "sign-in throttle unavailable (%s: %s): attempt from %s let through", type(exc).__name__, exc, address
        )
        return 0
    wait = max(1, math.ceil(stats.reset_time - time.time()))
    logger.warning("sign-in refused from %s: failed sign-ins reached %s; retry in %ss", address, item, wait)
    return wait


def record_failure(request, where, username):
    """Count, log and audit one failed sign-in (``where``: "panel basic auth" / "admin login")."""
    address = client_address(request)
    item = _item()
    try:
        _limiter().hit(item, address)
    except redis.RedisError as exc:
        logger.error(
            "sign-in throttle unavailable (%s: %s): failure from %s not counted", type(exc).__name__, exc, address
        )
    logger.warning("failed sign-in (%s) as %r from %s", where, username, address)
    audit.record(
        f"{'basic:' if where == 'panel basic auth' else ''}{username}",
        "login_failed",
        outcome="error",
        detail=f"failed sign-in ({where}) from {address}",
    )


def too_many(request, wait):
    """The 429 answer, with ``Retry-After``."""
    response = render(request, "queues/denied.html", {"reason": "throttled", "retry_after": wait}, status=429)
    response["Retry-After"] = str(wait)
    return response


def throttled_login(login_view):
    """Wrap an admin site's login view: 429 while the address is throttled, and count a POST that
    did not sign in (the form shown again) as a failure."""

    @functools.wraps(login_view)
    def view(request, *args, **kwargs):
        if request.method != "POST":
            return login_view(request, *args, **kwargs)
        wait = retry_after(request)
        if wait:
            return too_many(request, wait)
        response = login_view(request, *args, **kwargs)
        user = getattr(request, "user", None)
        if response.status_code == 200 and not (user is not None and user.is_authenticated):
            record_failure(request, "admin login", request.POST.get("username", "")[:150])
        return response

    view.queues_throttled = True
    return view


def protect_admin_login(site):
    """Throttle ``site``'s login form (call before its URLs are built; idempotent)."""
    if not getattr(site.login, "queues_throttled", False):
        site.login = throttled_login(site.login)
