"""Declared schedules: where they are declared (feature apps' ``SCHEDULES``, then ``OPTIMA_SCHEDULES``),
their validation (system checks queues.E030-E037; ``declared_schedules`` refuses the same problems at
start-up) and the ``Schedule`` each declaration becomes. Redis is not read here.
"""

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field

import crontab
from django.conf import settings
from django.core import checks as django_checks
from django.utils.module_loading import import_string

from queues import conf
from queues.catalog import jobs as catalog
from queues.catalog import queues as queue_declarations  # aliased: declarations() below lists the schedules'
from queues.exceptions import InvalidJob
from queues.producer.api import _check_args

TEMPLATE_PREFIX = "schedule-"
SCHEDULE_ID_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")
SCHEDULE_KEYS = ("id", "queue", "func", "args", "kwargs", "cron", "interval", "attempts", "timeout", "missed")
MISSED_POLICIES = ("once", "skip")  # or {"catch_up": N}
DEFAULT_MISSED = "once"  # what the scheduler did before the policy existed
MAX_CATCH_UP = 1000  # runs one poll enqueues for one schedule, at most


@dataclass(frozen=True)
class Schedule:
    id: str
    queue: str
    func: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    cron: str | None = None  # 5-field cron expression, UTC
    interval: int | None = None  # seconds
    attempts: int | None = None  # None: the queue's
    timeout: int | None = None  # None: the queue's
    source: str = "settings"
    # Not in spec()/digest(): the policy changes no timing, so changing it does not reschedule.
    missed: object = DEFAULT_MISSED  # "once", "skip" or {"catch_up": N}

    @property
    def template_id(self):
        return f"{TEMPLATE_PREFIX}{self.id}"

    def spec(self):
        """The JSON-able definition (what a change of the declaration changes)."""
        return {
            "id": self.id,
            "queue": self.queue,
            "func": self.func,
            "args": list(self.args),
            "kwargs": dict(self.kwargs),
            "cron": self.cron,
            "interval": self.interval,
            "attempts": self.attempts,
            "timeout": self.timeout,
        }

    def digest(self):
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:16]

    def next_run(self, after):
        """The first run strictly after ``after`` (aware datetime), as an aware UTC datetime."""
        after = after.astimezone(dt.UTC)
        if self.interval:
            return after + dt.timedelta(seconds=self.interval)
        return crontab.CronTab(self.cron).next(now=after, return_datetime=True, default_utc=True).astimezone(dt.UTC)


def declarations():
    """(where, list) of every schedule declaration: feature apps' ``SCHEDULES``, then settings."""
    found = []
    for app_config, module in queue_declarations.app_modules():
        if hasattr(module, "SCHEDULES"):
            found.append((f"{app_config.label}.queues.SCHEDULES", module.SCHEDULES))
    found.append(("OPTIMA_SCHEDULES", getattr(settings, "OPTIMA_SCHEDULES", [])))
    return found


def declared_schedules():
    """Every declared Schedule, by id; settings override an app's schedule of the same id."""
    conf.raise_first_error(validate_schedules())
    result = {}
    for where, entries in declarations():
        for entry in entries:
            result[entry["id"]] = Schedule(
                id=entry["id"],
                queue=entry["queue"],
                func=entry["func"],
                args=tuple(entry.get("args") or ()),
                kwargs=dict(entry.get("kwargs") or {}),
                cron=entry.get("cron"),
                interval=entry.get("interval"),
                attempts=entry.get("attempts"),
                timeout=entry.get("timeout"),
                source=where,
                missed=entry.get("missed", DEFAULT_MISSED),
            )
    return [result[k] for k in sorted(result)]


def validate_schedules(queue_names=None):
    """Problems of the schedule declarations (check ids queues.E030-E037, docs/checks.md)."""
    if queue_names is None:
        queue_names = queue_declarations.names()
    problems = []
    for where, entries in declarations():
        if not isinstance(entries, (list, tuple)):
            problems.append(
                conf.Problem(
                    "queues.E030",
                    f"{where} must be a list of schedule dicts, got {entries!r}.",
                    "E.g. [{'id': 'nightly', 'queue': 'default', 'func': 'app.jobs.f', 'cron': '0 3 * * *'}].",
                )
            )
            continue
        seen = set()
        for i, entry in enumerate(entries):
            label = f"{where}[{i}]"
            if not isinstance(entry, dict):
                problems.append(
                    conf.Problem(
                        "queues.E030", f"{label} must be a dict, got {entry!r}.", f"Keys: {', '.join(SCHEDULE_KEYS)}."
                    )
                )
                continue
            for key in entry:
                if key not in SCHEDULE_KEYS:
                    problems.append(
                        conf.Problem(
                            "queues.E031",
                            f"{label} has an unknown key {key!r}.",
                            f"{conf._did_you_mean(key, SCHEDULE_KEYS)}Valid keys: {', '.join(SCHEDULE_KEYS)}.",
                        )
                    )
            sid = entry.get("id")
            if not isinstance(sid, str) or not SCHEDULE_ID_RE.fullmatch(sid):
                problems.append(
                    conf.Problem(
                        "queues.E032",
                        f"{label}['id'] must match [a-z0-9][a-z0-9_.-]{{0,99}}, got {sid!r}.",
                        "Give every schedule an explicit, stable id (it names the schedule in Redis).",
                    )
                )
            elif sid in seen:
                problems.append(
                    conf.Problem(
                        "queues.E032",
                        f"{label}['id'] {sid!r} is declared twice in {where}.",
                        "Schedule ids must be unique.",
                    )
                )
            else:
                seen.add(sid)
                label = f"{where}[{sid!r}]"
            queue = entry.get("queue")
            if queue not in queue_names:
                problems.append(
                    conf.Problem(
                        "queues.E033",
                        f"{label}['queue'] is {queue!r}, which is not a declared queue.",
                        f"{conf._did_you_mean(str(queue), queue_names)}Declared queues: "
                        f"{', '.join(sorted(queue_names)) or '(none)'}.",
                    )
                )
            func = entry.get("func")
            try:
                ok = isinstance(func, str) and callable(import_string(func))
            except ImportError:
                ok = False
            if not ok:
                problems.append(
                    conf.Problem(
                        "queues.E034",
                        f"{label}['func'] is {func!r}, which cannot be imported.",
                        "Give the dotted path of a module-level function, e.g. 'features.orders.jobs.sync_all'.",
                    )
                )
            elif not catalog.is_declared(func):
                problems.append(
                    conf.Problem(
                        "queues.E036",
                        f"{label}['func'] {catalog.why_not(func)}",
                        "A periodic job runs only when its function is a declared job.",
                    )
                )
            problems.extend(_validate_timing(label, entry))
            problems.extend(_validate_missed(label, entry))
            try:
                _check_args(
                    list(entry.get("args") or ())
                    if isinstance(entry.get("args", ()), (list, tuple))
                    else entry.get("args"),
                    entry.get("kwargs") or {},
                )
            except InvalidJob as exc:
                problems.append(conf.Problem("queues.E035", f"{label}: {exc}", "Schedule arguments are JSON."))
            options = {k: entry[k] for k in ("attempts", "timeout") if entry.get(k) is not None}
            problems.extend(conf.validate_job_options(label, options))
    return problems


def _validate_timing(label, entry):
    cron, interval = entry.get("cron"), entry.get("interval")
    if (cron is None) == (interval is None):
        return [
            conf.Problem(
                "queues.E035",
                f"{label} needs exactly one of 'cron' and 'interval', got cron={cron!r}, interval={interval!r}.",
                "'cron': '*/15 * * * *' (UTC) or 'interval': 900 (seconds).",
            )
        ]
    if interval is not None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            return [
                conf.Problem(
                    "queues.E035",
                    f"{label}['interval'] must be a whole number of seconds >= 1, got {interval!r}.",
                    "E.g. 'interval': 300.",
                )
            ]
        return []
    try:
        ok = isinstance(cron, str) and len(cron.split()) == 5 and crontab.CronTab(cron) is not None
    except ValueError:
        ok = False
    if not ok:
        return [
            conf.Problem(
                "queues.E035",
                f"{label}['cron'] is {cron!r}, not a 5-field cron expression.",
                "minute hour day-of-month month day-of-week, in UTC: e.g. '0 3 * * *'.",
            )
        ]
    return []


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


@django_checks.register(django_checks.Tags.compatibility)
def check_schedules(app_configs=None, **kwargs):
    """System check of the schedule declarations (queues.E030-E037)."""
    return conf.check_messages(validate_schedules())
