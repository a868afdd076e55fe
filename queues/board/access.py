"""Who may see the queue panel, and who may change anything through it.

Decided per request, reading settings at that moment (so ``override_settings`` works):

- ``OPTIMA_ENV`` dev/test: everyone gets in and may act (the record's contract: the panel is open).
- stage/prod, an active staff user with ``queues.view_queue_panel`` gets in; with
  ``queues.act_on_queue_panel`` (which implies viewing) may also act.
- stage/prod, HTTP basic auth equal to QUEUE_BOARD_USER/QUEUE_BOARD_PASSWORD — only when both are
  set, compared in constant time — gets in and may act (the record's shared account).
- stage/prod, anybody else: 401 with a basic challenge (basic auth on) or the admin login page; a
  staff user without the permission gets 403.

Any request but a GET or HEAD needs "may act", on every panel view whatever it does (``guard``);
changes are POST only (Django's CSRF protection applies to every panel form). A panel view never
redirects off this site: ``guard`` drops a foreign ``Referer`` / ``next_url`` before the view reads
it and sends any other off-site redirect to the panel's home.
When only one of QUEUE_BOARD_USER / QUEUE_BOARD_PASSWORD is set, basic auth stays off and the
system check ``queues.W020`` plus a start-up log line say so. The panel is never open in stage/prod.

Failed basic-auth attempts are throttled per client address (``queues.board.throttle``, shared with the
admin login form): past ``QUEUE_LOGIN_FAILURES`` the panel answers 429 with ``Retry-After``
without checking the credentials. In stage/prod a ``QUEUE_BOARD_PASSWORD`` shorter than
``MIN_PASSWORD`` characters is a system check error (``queues.E021``) and basic auth stays off.

Every view runs inside ``bounded.request_scope()`` (short Redis timeouts, a deadline); a Redis
error answers 503 with a page naming the masked Redis URL, never a 500 after 26 s.

django-rq's views only ask ``request.user.is_staff``; for a request let in by basic auth or by the
open dev panel, ``request.user`` becomes a ``PanelOperator`` (staff, no database row) carrying the
identity the audit trail records.
"""

import base64
import binascii
import functools
import hashlib
import hmac
from dataclasses import dataclass

import redis
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.views import redirect_to_login
from django.db import InterfaceError, OperationalError
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from queues.board import bounded, throttle
from queues.conf import Problem
from queues.connection import servers
from queues.exceptions import QueueUnavailable
from queues.logsafe import get_logger
from queues.permissions import ACT_ON_QUEUE_PANEL, VIEW_QUEUE_PANEL

logger = get_logger("queues.board")

OPEN_ENVS = ("dev", "test")
VIEW_PERM = VIEW_QUEUE_PANEL  # the public names (queues.VIEW_QUEUE_PANEL, ...)
ACT_PERM = ACT_ON_QUEUE_PANEL
REALM = "Optima queues"
MIN_PASSWORD = 16  # characters of QUEUE_BOARD_PASSWORD required in stage/prod (queues.E021)


@dataclass(frozen=True)
class Access:
    can_view: bool
    can_act: bool
    identity: str  # what the audit trail records
    via: str  # "open", "staff", "basic" or "none"
    user: object = None  # the Django user, when there is one
    reason: str = ""  # why a request was refused ("login", "basic", "permission", "throttled")
    retry_after: int = 0  # seconds, when throttled


class PanelOperator(AnonymousUser):
    """A staff-looking request user without a database row: the basic-auth account, or anyone on an
    open (dev/test) panel. Holds exactly the panel permissions its access grants."""

    # AnonymousUser's stubs type these Literal[False]: this one is the exception on purpose.
    is_active = True  # type: ignore[assignment]
    is_staff = True  # type: ignore[assignment]

    def __init__(self, identity, perms):
        self.identity = identity
        self._perms = frozenset(perms)

    @property
    def username(self):
        return self.identity

    def get_username(self):
        return self.identity

    def __str__(self):
        return self.identity

    def has_perm(self, perm, obj=None):
        return perm in self._perms

    def has_perms(self, perm_list, obj=None):
        return all(p in self._perms for p in perm_list)

    def has_module_perms(self, app_label):
        return False


def env():
    return getattr(settings, "OPTIMA_ENV", "prod")  # unset means prod (the project's settings define it)


def basic_auth_settings():
    """(user, password) as configured; either may be empty."""
    return getattr(settings, "QUEUE_BOARD_USER", "") or "", getattr(settings, "QUEUE_BOARD_PASSWORD", "") or ""


def basic_auth_enabled():
    user, password = basic_auth_settings()
    return bool(user and password) and not _password_too_short(password)


def _password_too_short(password):
    return env() in ("stage", "prod") and len(password) < MIN_PASSWORD


def validate_basic_auth():
    """Problems of the basic-auth settings (W020): the same messages at start-up and in checks."""
    user, password = basic_auth_settings()
    if bool(user) == bool(password):
        return []
    present, missing = (
        ("QUEUE_BOARD_USER", "QUEUE_BOARD_PASSWORD") if user else ("QUEUE_BOARD_PASSWORD", "QUEUE_BOARD_USER")
    )
    return [
        Problem(
            "queues.W020",
            f"{present} is set but {missing} is not: HTTP basic auth of the queue panel (/admin/queues/) stays off.",
            f"Set {missing} too (both from the environment), or unset {present}. Staff accounts with the "
            "'Can view the queue panel' permission still get in.",
            level="warning",
        )
    ]


def validate_password_length():
    """E021: in stage/prod the basic-auth password must be at least MIN_PASSWORD characters."""
    _, password = basic_auth_settings()
    if not password or not _password_too_short(password):
        return []
    return [
        Problem(
            "queues.E021",
            f"QUEUE_BOARD_PASSWORD is {len(password)} characters long; OPTIMA_ENV={env()} needs at least "
            f"{MIN_PASSWORD}: the queue panel's basic auth stays off until it is longer.",
            "Set QUEUE_BOARD_PASSWORD (from the environment) to a long random value, e.g. the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(24))'.",
        )
    ]


def log_startup_problems():
    for problem in validate_basic_auth() + validate_password_length():
        logger.warning("%s %s (%s)", problem.msg, problem.hint, problem.id)


def _basic_credentials(request):
    """(user, password) from an ``Authorization: Basic`` header, or None."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ("", "")
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else ("", "")


def _basic_matches(given_user, given_password):
    user, password = basic_auth_settings()
    # Digests first, so not even the lengths leak through timing; both comparisons always run.
    user_ok = hmac.compare_digest(_digest(given_user), _digest(user))
    password_ok = hmac.compare_digest(_digest(given_password), _digest(password))
    return user_ok & password_ok


def _digest(text):
    return hashlib.sha256(text.encode("utf-8")).digest()


def decide(request):
    """The Access of this request (see the module's table). A wrong basic-auth attempt is counted,
    logged and audited here (``queues.board.throttle.record_failure``), once per request."""
    user = getattr(request, "user", None)
    authenticated = bool(user is not None and user.is_authenticated and user.is_active)
    if env() in OPEN_ENVS:
        identity = user.get_username() if authenticated else f"anonymous (OPTIMA_ENV={env()})"
        return Access(True, True, identity, "open", user if authenticated else None)

    if authenticated and user.is_staff:
        can_act = user.has_perm(ACT_PERM)
        if can_act or user.has_perm(VIEW_PERM):
            return Access(True, can_act, user.get_username(), "staff", user)

    credentials = _basic_credentials(request)
    if credentials is not None and basic_auth_enabled():
        wait = throttle.retry_after(request)
        if wait:
            return Access(False, False, "", "none", reason="throttled", retry_after=wait)
        if _basic_matches(*credentials):
            return Access(True, True, f"basic:{credentials[0]}", "basic")
        throttle.record_failure(request, "panel basic auth", credentials[0][:150])
        return Access(False, False, "", "none", reason="basic")
    if authenticated and user.is_staff:
        return Access(False, False, user.get_username(), "none", user, reason="permission")
    return Access(False, False, "", "none", reason="basic" if basic_auth_enabled() else "login")


def refuse(request, access):
    """The response for a request that may not see the panel."""
    if access.reason == "throttled":
        return throttle.too_many(request, access.retry_after)
    if access.reason == "login":
        return redirect_to_login(request.get_full_path(), reverse("admin:login"))
    if access.reason == "basic":
        response = render(
            request, "queues/denied.html", {"reason": "basic", "login_url": _login_url(request)}, status=401
        )
        response["WWW-Authenticate"] = f'Basic realm="{REALM}", charset="UTF-8"'
        return response
    return render(
        request, "queues/denied.html", {"reason": access.reason, "login_url": _login_url(request)}, status=403
    )


def _login_url(request):
    return f"{reverse('admin:login')}?next={request.get_full_path()}"


def _operator_for(access):
    perms = {VIEW_PERM} | ({ACT_PERM} if access.can_act else set())
    return PanelOperator(access.identity, perms)


def panel_context(request):
    """The admin's context of a panel page (``admin.site.each_context``, which django-rq's ``each_context``
    returns), in one consistent state for a request no Django user is behind: the open dev/test panel's
    anonymous visitor, or the basic-auth account (a ``PanelOperator``). The admin would show it a "Log out"
    button (there is no session to end) and a sidebar saying "You don't have permission to view or edit
    anything" beside a panel that works; instead its pages show neither: the header names the panel, the
    identity the audit trail records, and a link to the admin's sign-in."""
    context = admin.site.each_context(request)
    operator = getattr(request, "user", None)
    if isinstance(operator, PanelOperator):
        context.update(
            has_permission=False,  # the admin's user tools (welcome, log out, change password)
            is_nav_sidebar_enabled=False,  # the admin's app list: none of it is this visitor's
            available_apps=[],
            panel_operator=operator,
        )
    return context


def database_unavailable(request, exc):
    """503: the database stayed locked or unreachable past its timeout (nothing was changed: the view's
    transaction rolled back). A page of its own, without the admin's base (which reads the user)."""
    logger.warning(
        "queue panel: database unavailable (%s: %s) for %s",
        type(exc).__name__,
        str(exc).splitlines()[0] if str(exc) else "",
        request.path,
    )
    response = render(request, "queues/database_unavailable.html", {"reason": type(exc).__name__}, status=503)
    response["Retry-After"] = "5"
    return response


def unavailable(request, exc):
    """503: the queue Redis did not answer; names its masked URL (with several servers, those of the request's
    servers that do not answer: ``bounded.failing_servers``), never the password."""
    failing = bounded.failing_servers()
    redis_url = ", ".join(url if name == servers.DEFAULT else f"{url} (server {name!r})" for name, url in failing)
    logger.warning(
        "queue panel: Redis at %s unavailable (%s: %s) for %s",
        redis_url,
        type(exc).__name__,
        exc,
        request.path,
    )
    response = render(
        request,
        "queues/unavailable.html",
        {
            "redis_url": redis_url,
            "setting": "REDIS_URL" if [n for n, _ in failing] == [servers.DEFAULT] else "REDIS_SERVERS",
            "reason": type(exc).__name__,
            "timeout": bounded.setting("QUEUE_BOARD_REDIS_TIMEOUT"),
            "deadline": bounded.setting("QUEUE_BOARD_DEADLINE"),
        },
        status=503,
    )
    response["Retry-After"] = "5"
    return response


SAFE_METHODS = ("GET", "HEAD")


def same_site(request, url):
    """Whether the redirect target ``url`` stays on this site: a path, or an http(s) URL of this host."""
    return url.startswith(("/", "http://", "https://")) and url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )


def _drop_foreign_targets(request):
    """django-rq redirects to the ``Referer`` (confirm_action) and to a posted ``next_url`` (actions),
    unchecked: a foreign one is dropped before the view reads it, so django-rq's own fallback (the
    queue's page) applies."""
    if not same_site(request, request.META.get("HTTP_REFERER", "/")):
        del request.META["HTTP_REFERER"]
    if request.method == "POST" and not same_site(request, request.POST.get("next_url", "/")):
        request.POST = request.POST.copy()
        del request.POST["next_url"]


def _on_site(request, response):
    """``response``, unless it redirects off this site (whatever view and parameter it took the target
    from): then a redirect to the panel's home."""
    location = response.get("Location", "") if 300 <= response.status_code < 400 else ""
    if not location or same_site(request, location):
        return response
    logger.warning(
        "queue panel: %s redirected to %s, off this site: sent to the panel's home instead", request.path, location
    )
    return HttpResponseRedirect(reverse("django_rq:home"))


def needs_act(request, act):
    """Whether this request needs the act permission: the view's own ``act`` (its GET is a change's
    confirmation page), or any method but GET/HEAD, whatever the view: deny by default."""
    return act or request.method not in SAFE_METHODS


def guard(view=None, *, act=False, long_running=False):
    """Wrap a panel view: refuse whoever may not view it, or act when ``needs_act`` (the one place
    that enforces it), and make ``request.queue_access`` and a staff ``request.user`` available.

    The view runs with the panel's bounded Redis clients (``bounded.request_scope``): with the
    per-request deadline, or, when ``long_running`` (queue-wide actions), with none and the app's
    ``SOCKET_TIMEOUT`` per round trip. A Redis error answers 503 (``unavailable``), and so does a
    database locked or unreachable past its timeout (``database_unavailable``)."""
    if view is None:
        return functools.partial(guard, act=act, long_running=long_running)

    @functools.wraps(view)
    def guarded(request, *args, **kwargs):
        try:
            return checked(request, *args, **kwargs)
        except (OperationalError, InterfaceError) as exc:  # the session, the user or the view's own rows
            return database_unavailable(request, exc)

    def checked(request, *args, **kwargs):
        access = decide(request)
        if not access.can_view:
            return refuse(request, access)
        request.queue_access = access
        user = getattr(request, "user", None)
        if not (user is not None and user.is_authenticated and user.is_active and user.is_staff):
            request.user = _operator_for(access)
        if needs_act(request, act) and not access.can_act:
            return render(request, "queues/denied.html", {"reason": "act"}, status=403)
        options = {"deadline": None, "timeout": bounded.long_running_timeout()} if long_running else {}
        _drop_foreign_targets(request)
        with bounded.request_scope(**options):  # the 503 page inside it: it names the servers the view used
            try:
                return _on_site(request, view(request, *args, **kwargs))
            except (redis.RedisError, QueueUnavailable) as exc:
                return unavailable(request, exc)

    guarded.queue_guard = {"act": act, "long_running": long_running}
    return guarded
