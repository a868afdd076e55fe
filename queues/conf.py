"""Every setting of the queues app, read in one place.

``options()`` is the cached accessor; the cache is cleared on Django's ``setting_changed``
so ``override_settings`` works. ``validate()`` checks the settings read here; the queue
declarations (these settings merged with the feature apps' ``QUEUES``) are merged and checked in
``queues/catalog/queues.py``, whose ``validate()`` the system checks report and first use refuses
with, so the messages match. docs/settings.md documents each value.

A leaf module: it imports nothing else from ``queues``, so every other module may import it.
"""

import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

if TYPE_CHECKING:
    from django.core.checks import CheckMessage

# Job options: the built-in global defaults. Overridable globally (settings.OPTIMA_QUEUE_DEFAULTS),
# per queue (settings.OPTIMA_QUEUES[name] or a feature app's QUEUES) and per enqueue.
JOB_DEFAULTS: dict[str, Any] = {
    "attempts": 5,  # runs in all, first included (1 = no retry)
    "backoff": 1.0,  # seconds before the first retry; doubles on each further retry
    "backoff_max": None,  # seconds; cap of one backoff delay (None: no cap)
    "jitter": 0.0,  # fraction 0..1 of each delay added at random (0: exact schedule)
    "timeout": 180,  # seconds one attempt may run before it is stopped
    "result_ttl": 24 * 3600,  # seconds a completed job is kept
    "completed_max": 1000,  # completed jobs kept per queue at most (oldest go first)
    "failure_ttl": -1,  # seconds a dead job is kept; -1: forever (removed by an operator)
    "non_retryable": (),  # dotted paths of exception classes that dead-letter at once
    # jobs sharing a limit_key that may be queued or running at once, when an enqueue gives a
    # limit_key without a limit_concurrency (queues/producer/limits.py); None: such an enqueue must give one
    "limit_concurrency": None,
    # seconds a run of a long job may go on before it pauses at its next checkpoint (issue 34:
    # queues/jobs/resume.py); None: no limit. Per enqueue ``max_run_seconds=`` beats it
    "max_run_seconds": None,
}

# Infrastructure options (settings.OPTIMA_QUEUES_OPTIONS), with units.
OPTION_DEFAULTS: dict[str, Any] = {
    "SOCKET_TIMEOUT": 2.0,  # seconds a web/enqueue Redis command may take
    "SOCKET_CONNECT_TIMEOUT": 1.0,  # seconds to open a Redis connection
    "HEALTH_CHECK_INTERVAL": 15,  # seconds between PINGs on idle pooled connections
    "HEALTH_TIMEOUT": 0.5,  # seconds each /healthz Redis probe may take (connect, then PING)
    "RECONCILE_INTERVAL": 300,  # seconds; workers mirror missed dead letters at most this often (0: never)
    "SCHEDULER_INTERVAL": 5,  # seconds between rq-scheduler polls of periodic jobs (manage.py rqscheduler)
    # Worker resilience (queues/resilience/, docs/operations.md):
    "SHUTDOWN_GRACE_SECONDS": 25,  # seconds a stopping worker lets its job finish before returning it to the queue
    "LIVENESS_INTERVAL_SECONDS": 2,  # seconds between a worker's liveness beats
    "LIVENESS_TTL_SECONDS": 10,  # seconds without a beat after which a worker counts as dead
    "ABANDONED_SCAN_SECONDS": 5,  # seconds between scans for jobs of dead workers (one worker scans at a time)
    "SCHEDULER_LOCK_SECONDS": 10,  # seconds RQ's scheduler lock outlives its holder's last heartbeat
    "DEQUEUE_WAIT_SECONDS": 2,  # seconds one blocking dequeue waits (a stop request is seen within this)
    "MULTI_QUEUE_POLL_SECONDS": 0.5,  # seconds, longest pause between polls of a worker serving several queues
    "REDIS_RETRY_MAX_SECONDS": 5,  # seconds, longest wait between reconnection attempts during an outage
    "OUTCOME_WAIT_SECONDS": 120,  # seconds a work horse keeps trying to record its job's outcome in an outage
    "STARTED_ENTRY_TTL_SECONDS": 3600,  # seconds a started-job entry outlives its last heartbeat (see docs)
    # each started job also gets rq's execution hash and the worker's set, which the workers and the panel of
    # releases up to 6f24d7d read (queues/jobs/execution.py): True only while one of them runs on the same Redis
    # (a deploy from such a release; queues.W063 says when)
    "RQ_EXECUTION_RECORDS": False,
    # The outbox (queues/producer/outbox.py, docs/operations.md#the-outbox):
    "OUTBOX_RELAY_SECONDS": 2.0,  # seconds between a worker's relays of outbox rows a commit left behind
    "OUTBOX_LEASE_SECONDS": 60,  # seconds a claimed row waits before another relay may push it (its relay died)
    # /metrics (queues/metrics/, docs/metrics.md):
    "METRICS_PREFIX": "optima",  # first word of every queue metric family: optima_queue_jobs, ...
    "METRICS_CACHE_SECONDS": 5.0,  # seconds one Redis read serves scrapes from (0: read on every scrape)
    "METRICS_REDIS_TIMEOUT": 0.5,  # seconds each connect/read of a scrape may take before it gives up
    # seconds; upper bounds of the job duration histogram's buckets (+Inf is implied)
    "METRICS_DURATION_BUCKETS": (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800),
    # seconds; upper bounds of the wait histogram (due -> started) and of the total one (first enqueue -> end)
    "METRICS_WAIT_BUCKETS": (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
    "METRICS_TOTAL_BUCKETS": (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
}

PREFIX_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
QUEUE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")

# A queue's Redis server (issue 36): the queue option ``"redis": NAME`` names a key of QUEUES_REDIS_SERVERS
# (queues/connection/servers.py); a queue without it lives on the default server, QUEUES_REDIS_URL, named so.
# Only a queue's declaration takes it, not OPTIMA_QUEUE_DEFAULTS nor an enqueue: a job is on its queue's server.
QUEUE_SERVER_OPTION = "redis"
DEFAULT_SERVER = "default"
SERVER_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


@dataclass(frozen=True)
class Problem:
    """One configuration problem: the check id, the message and what to do about it."""

    id: str
    msg: str
    hint: str = ""
    level: str = "error"  # or "warning"


def check_messages(problems: Iterable[Problem]) -> list["CheckMessage"]:
    """A validator's ``problems`` as Django check messages: ``Error`` or ``Warning`` by level, with the
    same id, message and hint. Every system check of this app returns this."""
    # At call time: settings import this module, and django.core.checks loads the database layer.
    from django.core import checks

    return [
        (checks.Error if p.level == "error" else checks.Warning)(p.msg, hint=p.hint or None, id=p.id) for p in problems
    ]


def raise_first_error(problems: Iterable[Problem], *, see_check: bool = True) -> None:
    """Refuse to go on when ``problems`` hold an error (warnings never stop anything): raise
    ImproperlyConfigured with the first error's message, hint and id — the system check's words.
    ``see_check`` adds "run manage.py check for all", for validators that may find several."""
    first = next((p for p in problems if p.level == "error"), None)
    if first is not None:
        more = "; run manage.py check for all" if see_check else ""
        raise ImproperlyConfigured(f"{first.msg} {first.hint} ({first.id}{more})")


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f"Did you mean {close[0]!r}? " if close else ""


def validate_prefix(prefix: object) -> list[Problem]:
    """Problems of a QUEUE_PREFIX value (E001)."""
    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix):
        return [
            Problem(
                "queues.E001",
                f"QUEUE_PREFIX must match [a-z0-9][a-z0-9_-]{{0,63}}, got {prefix!r}.",
                "Use lower-case letters, digits, '-' and '_', e.g. 'optima' or 'optima-stage'.",
            )
        ]
    return []


def validate_job_options(where: str, options: object, *, allow_none: bool = False) -> list[Problem]:
    """Problems of one job-options dict. ``where`` names it in messages, e.g.
    ``OPTIMA_QUEUES['orders-sync']``."""
    if not isinstance(options, dict):
        return [
            Problem(
                "queues.E008",
                f"{where} must be a dict of job options, got {type(options).__name__} {options!r}.",
                f"Use a dict with keys among: {', '.join(JOB_DEFAULTS)}.",
            )
        ]
    problems: list[Problem] = []
    for key, value in options.items():
        if key not in JOB_DEFAULTS:
            problems.append(
                Problem(
                    "queues.E002",
                    f"{where} has an unknown option {key!r}.",
                    f"{_did_you_mean(key, JOB_DEFAULTS)}Valid options: {', '.join(JOB_DEFAULTS)}.",
                )
            )
            continue
        if value is None and (allow_none or key in ("backoff_max", "limit_concurrency", "max_run_seconds")):
            continue
        problems.extend(_validate_job_option(where, key, value))
    return problems


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _validate_job_option(where: str, key: str, value: Any) -> list[Problem]:
    label = f"{where}[{key!r}]"
    if key == "attempts":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return [
                Problem(
                    "queues.E003",
                    f"{label} must be an integer >= 1, got {value!r}.",
                    "attempts counts every run, the first included: 1 disables retries, 5 is the default.",
                )
            ]
        return []
    if key in ("backoff", "backoff_max", "timeout"):
        if not _is_number(value) or value <= 0:
            return [
                Problem(
                    "queues.E005",
                    f"{label} must be a number of seconds > 0, got {value!r}.",
                    f"Set {key} to a positive number of seconds, or remove it for the default.",
                )
            ]
        return []
    if key == "jitter":
        if not _is_number(value) or not 0 <= value <= 1:
            return [
                Problem(
                    "queues.E005",
                    f"{label} must be a fraction between 0 and 1, got {value!r}.",
                    "0 keeps the exact schedule; 0.2 adds up to 20% of each delay at random.",
                )
            ]
        return []
    if key in ("result_ttl", "failure_ttl"):
        if not isinstance(value, int) or isinstance(value, bool) or (value <= 0 and value != -1):
            return [
                Problem(
                    "queues.E005",
                    f"{label} must be a whole number of seconds > 0 or -1 (forever), got {value!r}.",
                    f"Set {key} to e.g. 86400, or -1 to keep jobs until removed.",
                )
            ]
        return []
    if key == "completed_max":
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return [
                Problem(
                    "queues.E005",
                    f"{label} must be an integer >= 0, got {value!r}.",
                    "It is how many completed jobs a queue keeps; 1000 is the default.",
                )
            ]
        return []
    if key == "limit_concurrency":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return [
                Problem(
                    "queues.E059",
                    f"{label} must be an integer >= 1 or None, got {value!r}.",
                    "It is how many jobs sharing a limit_key may be queued or running at once "
                    "(e.g. 2); None leaves it to each enqueue's limit_concurrency.",
                )
            ]
        return []
    if key == "max_run_seconds":
        if not _is_number(value) or not 0 < value < float("inf"):
            return [
                Problem(
                    "queues.E005",
                    f"{label} must be a number of seconds > 0 or None, got {value!r}.",
                    "A long job pauses at its first checkpoint past it and resumes "
                    "(docs/workflows.md#long-jobs-that-resume); e.g. 600, or None for no limit.",
                )
            ]
        return []
    if key == "non_retryable":
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            return [
                Problem(
                    "queues.E005",
                    f"{label} must be a list of dotted exception class paths, got {value!r}.",
                    "E.g. ['myapp.errors.BadInput'].",
                )
            ]
        problems: list[Problem] = []
        for path in value:
            try:
                cls = import_string(path) if isinstance(path, str) else path
                ok = isinstance(cls, type) and issubclass(cls, BaseException)
            except ImportError:
                ok = False
            if not ok:
                problems.append(
                    Problem(
                        "queues.E007",
                        f"{label} lists {path!r}, which is not an importable exception class.",
                        "Give the dotted path of an exception class, e.g. 'requests.HTTPError'.",
                    )
                )
        return problems
    return []


def validate_queue_name(name: object, where: str = "OPTIMA_QUEUES") -> list[Problem]:
    if not isinstance(name, str) or not QUEUE_NAME_RE.fullmatch(name):
        return [
            Problem(
                "queues.E004",
                f"{where} declares a queue named {name!r}, which is not a valid queue name.",
                "Queue names match [a-z0-9][a-z0-9_-]*: lower-case letters, digits, '-' and '_', "
                "starting with a letter or digit (e.g. 'orders-sync').",
            )
        ]
    return []


def validate_declaration(where: str, declaration: Mapping[object, object]) -> list[Problem]:
    """Problems of one ``{queue name: job options}`` dict; ``where`` names it, e.g. ``OPTIMA_QUEUES``."""
    problems: list[Problem] = []
    for name, options in declaration.items():
        problems.extend(validate_queue_name(name, where))
        if isinstance(options, dict) and QUEUE_SERVER_OPTION in options:
            options = dict(options)
            problems.extend(validate_server_option(f"{where}[{name!r}]", options.pop(QUEUE_SERVER_OPTION)))
        problems.extend(validate_job_options(f"{where}[{name!r}]", options))
    return problems


def validate_server_option(where: str, value: object) -> list[Problem]:
    """Problems of a queue's ``"redis"`` option as a value (E133); whether the server exists is
    ``queues.connection.servers.validate()``'s (E130)."""
    if not isinstance(value, str) or not SERVER_NAME_RE.fullmatch(value):
        return [
            Problem(
                "queues.E133",
                f"{where}[{QUEUE_SERVER_OPTION!r}] must be the name of a Redis server, got {value!r}.",
                f"A key of QUEUES_REDIS_SERVERS (lower-case letters, digits, '-' and '_'), or {DEFAULT_SERVER!r} "
                "for QUEUES_REDIS_URL; remove the option for the default server "
                "(docs/settings.md#several-redis-servers).",
            )
        ]
    return []


def validate() -> list[Problem]:
    """Problems of the settings read here (prefix, rq's key prefix, global job defaults), in a stable
    order. ``queues.catalog.queues.validate()`` adds the queue declarations' problems to these."""
    problems = list(validate_prefix(prefix()))
    # At call time: settings import this module, and rq fixes its key prefix when first imported (E006).
    import rq.defaults

    if not problems and rq.defaults.RQ_KEY_PREFIX != prefix():
        problems.append(
            Problem(
                "queues.E006",
                f"rq was imported with key prefix {rq.defaults.RQ_KEY_PREFIX!r} but QUEUE_PREFIX is {prefix()!r}: "
                "RQ's keys would escape the environment's prefix.",
                "The queues app sets rq's prefix from QUEUE_PREFIX when Django loads it, unless rq is imported "
                "already: list 'queues' before 'django_rq' (and any app that imports rq) in INSTALLED_APPS, import "
                "nothing that imports rq in settings; a script that imports rq before django.setup() must export "
                "RQ_KEY_PREFIX equal to QUEUE_PREFIX.",
            )
        )
    problems.extend(validate_job_options("OPTIMA_QUEUE_DEFAULTS", getattr(settings, "OPTIMA_QUEUE_DEFAULTS", {})))
    return problems


def job_defaults() -> dict[str, Any]:
    """The global layer of job options: JOB_DEFAULTS updated with settings.OPTIMA_QUEUE_DEFAULTS."""
    merged = dict(JOB_DEFAULTS)
    merged.update(getattr(settings, "OPTIMA_QUEUE_DEFAULTS", {}))
    return merged


def queues_setting() -> Any:
    """settings.OPTIMA_QUEUES as given, unvalidated (``queues.catalog.queues`` checks and merges it)."""
    return getattr(settings, "OPTIMA_QUEUES", {})


@functools.cache
def options() -> dict[str, Any]:
    """Infrastructure options: OPTION_DEFAULTS updated with settings.OPTIMA_QUEUES_OPTIONS."""
    merged = dict(OPTION_DEFAULTS)
    merged.update(getattr(settings, "OPTIMA_QUEUES_OPTIONS", {}))
    return merged


def prefix() -> str:
    return getattr(settings, "QUEUE_PREFIX", "optima")


def app_key(*parts: object) -> str:
    """A Redis key of this app's own, under the environment prefix: ``<prefix>:optima:<parts>``."""
    return ":".join((prefix(), "optima") + tuple(str(p) for p in parts))


@receiver(setting_changed)
def _clear_caches(*, setting: str, **kwargs: object) -> None:
    if setting.startswith(("OPTIMA_", "QUEUE", "CACHE_REDIS")):
        # Only this module's cache: catalog/queues.py, connection/clients.py, jobs/signing.py, producer/write.py
        # and tracing/setup.py clear their own on the same signal, so that this module never imports them.
        options.cache_clear()
