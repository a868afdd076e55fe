"""The validation of one schedule declaration (``validate_entry``): its keys, id, queue, function (a declared
job or a ``@task``), timing and zone, missed-run policy, arguments and options. ``declare`` runs it on every
declaration (the system checks queues.E030-E039) and ``stored`` on each of the admin's rows, so a message is
the same wherever the schedule is declared.
"""

import re

import crontab
from django.utils.module_loading import import_string

from queues import conf
from queues.catalog import jobs as catalog
from queues.exceptions import InvalidJob
from queues.periodic import zones
from queues.producer.api import _check_args

SCHEDULE_ID_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")
SCHEDULE_KEYS = ("id", "queue", "func", "args", "kwargs", "cron", "interval", "tz", "attempts", "timeout", "missed")
DEFAULT_TZ = "UTC"
MISSED_POLICIES = ("once", "skip")  # or {"catch_up": N}
DEFAULT_MISSED = "once"  # what the scheduler did before the policy existed
MAX_CATCH_UP = 1000  # runs one poll enqueues for one schedule, at most


def validate_entry(label, entry, queue_names, check_id=True):
    """[(key, Problem)] of one schedule declaration ``entry`` (a dict), ``label`` naming it in messages.
    The key is the declaration's key the problem is about (the admin puts the error on that field)."""
    found = []
    for key in entry:
        if key not in SCHEDULE_KEYS:
            found.append(
                (
                    key,
                    conf.Problem(
                        "queues.E031",
                        f"{label} has an unknown key {key!r}.",
                        f"{conf._did_you_mean(key, SCHEDULE_KEYS)}Valid keys: {', '.join(SCHEDULE_KEYS)}.",
                    ),
                )
            )
    sid = entry.get("id")
    if check_id and (not isinstance(sid, str) or not SCHEDULE_ID_RE.fullmatch(sid)):
        found.append(
            (
                "id",
                conf.Problem(
                    "queues.E032",
                    f"{label}['id'] must match [a-z0-9][a-z0-9_.-]{{0,99}}, got {sid!r}.",
                    "Give every schedule an explicit, stable id (it names the schedule in Redis).",
                ),
            )
        )
    queue = entry.get("queue")
    if queue not in queue_names:
        found.append(
            (
                "queue",
                conf.Problem(
                    "queues.E033",
                    f"{label}['queue'] is {queue!r}, which is not a declared queue.",
                    f"{conf._did_you_mean(str(queue), queue_names)}Declared queues: "
                    f"{', '.join(sorted(queue_names)) or '(none)'}.",
                ),
            )
        )
    found.extend(("func", problem) for problem in _validate_func(label, entry.get("func")))
    found.extend(_validate_timing(label, entry))
    found.extend(("missed", problem) for problem in _validate_missed(label, entry))
    try:
        _check_args(
            list(entry.get("args") or ()) if isinstance(entry.get("args", ()), (list, tuple)) else entry.get("args"),
            entry.get("kwargs") or {},
        )
    except InvalidJob as exc:
        found.append(("args", conf.Problem("queues.E035", f"{label}: {exc}", "Schedule arguments are JSON.")))
    options = {k: entry[k] for k in ("attempts", "timeout") if entry.get(k) is not None}
    for key, value in options.items():
        found.extend((key, problem) for problem in conf.validate_job_options(label, {key: value}))
    return found


def task_of(func):
    """The Django Task (a ``@task`` of the queues' Tasks backend) the dotted path ``func`` names, or None."""
    try:
        target = import_string(func) if isinstance(func, str) else None
    except ImportError:
        return None
    return target if target is not None and catalog.unwrap(target) is not target else None


def function_path(func):
    """The path of the function a schedule's ``func`` runs: a Task's own function, else ``func``."""
    task = task_of(func)
    return f"{task.func.__module__}.{task.func.__qualname__}" if task is not None else func


def _validate_func(label, func):
    try:
        target = import_string(func) if isinstance(func, str) else None
    except ImportError:
        target = None
    if target is not None and task_of(func) is not None:
        func = function_path(func)  # a Task: its function, declared a job when the Task was built
    elif target is None or not callable(target):
        return [
            conf.Problem(
                "queues.E034",
                f"{label}['func'] is {func!r}, which cannot be imported.",
                "Give the dotted path of a module-level function or of a @task, e.g. 'features.orders.jobs.sync_all'.",
            )
        ]
    if not catalog.is_declared(func):
        return [
            conf.Problem(
                "queues.E036",
                f"{label}['func'] {catalog.why_not(func)}",
                "A periodic job runs only when its function is a declared job.",
            )
        ]
    return []


def _validate_timing(label, entry):
    """[(key, Problem)] of the timing: exactly one of cron and interval (E035), the zone (E038, E039)."""
    cron, interval, tz = entry.get("cron"), entry.get("interval"), entry.get("tz")
    found = []
    if tz is not None:
        why = zones.zone_problem(tz)
        if why is not None:
            found.append(
                (
                    "tz",
                    conf.Problem(
                        "queues.E038",
                        f"{label}['tz'] is {tz!r}, which {why}.",
                        "Give an IANA time zone name, e.g. 'Europe/Moscow' or 'America/New_York' (or leave 'tz' out "
                        "for UTC); where the system has no zone database, install the tzdata package.",
                    ),
                )
            )
        elif interval is not None and cron is None and tz != DEFAULT_TZ:
            found.append(
                (
                    "tz",
                    conf.Problem(
                        "queues.E039",
                        f"{label} has 'tz': {tz!r} with an 'interval': a zone moves cron ticks only.",
                        "Leave 'tz' out of an interval schedule, or give a 'cron' expression to run at the zone's "
                        "wall-clock times.",
                    ),
                )
            )
    if (cron is None) == (interval is None):
        return found + [
            (
                "cron",
                conf.Problem(
                    "queues.E035",
                    f"{label} needs exactly one of 'cron' and 'interval', got cron={cron!r}, interval={interval!r}.",
                    "'cron': '*/15 * * * *' (in the schedule's 'tz', UTC by default) or 'interval': 900 (seconds).",
                ),
            )
        ]
    if interval is not None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            found.append(
                (
                    "interval",
                    conf.Problem(
                        "queues.E035",
                        f"{label}['interval'] must be a whole number of seconds >= 1, got {interval!r}.",
                        "E.g. 'interval': 300.",
                    ),
                )
            )
        return found
    try:
        ok = isinstance(cron, str) and len(cron.split()) == 5 and crontab.CronTab(cron) is not None
    except ValueError:
        ok = False
    if not ok:
        found.append(
            (
                "cron",
                conf.Problem(
                    "queues.E035",
                    f"{label}['cron'] is {cron!r}, not a 5-field cron expression.",
                    "minute hour day-of-month month day-of-week, in the schedule's 'tz' (UTC by default): "
                    "e.g. '0 3 * * *'.",
                ),
            )
        )
    return found


def _validate_missed(label, entry):
    missed = entry.get("missed", DEFAULT_MISSED)
    if missed in MISSED_POLICIES and isinstance(missed, str):
        return []
    if isinstance(missed, dict) and set(missed) == {"catch_up"}:
        n = missed["catch_up"]
        if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_CATCH_UP:
            return []
    return [
        conf.Problem(
            "queues.E037",
            f"{label}['missed'] must be 'once', 'skip' or {{'catch_up': N}} with "
            f"N a whole number from 1 to {MAX_CATCH_UP}, got {missed!r}.",
            "'once' (default): one run for all missed ticks; 'skip': none, go on at the next "
            "tick; {'catch_up': 5}: the latest 5 due ticks, each its own run.",
        )
    ]
