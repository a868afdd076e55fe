"""Declared schedules: where they are declared (feature apps' ``SCHEDULES``, then ``OPTIMA_SCHEDULES``),
their validation (system checks queues.E030-E039; ``declared_schedules`` refuses the same problems at
start-up; ``validate_entry`` checks one declaration, for the admin's stored schedules too) and the ``Schedule``
each declaration becomes. Redis is not read here.
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
from queues.periodic import zones
from queues.producer.api import _check_args

TEMPLATE_PREFIX = "schedule-"
SCHEDULE_ID_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")
SCHEDULE_KEYS = ("id", "queue", "func", "args", "kwargs", "cron", "interval", "tz", "attempts", "timeout", "missed")
DEFAULT_TZ = "UTC"
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
    cron: str | None = None  # 5-field cron expression, wall-clock time of ``tz``
    interval: int | None = None  # seconds
    attempts: int | None = None  # None: the queue's
    timeout: int | None = None  # None: the queue's
    source: str = "settings"
    # Not in spec()/digest(): the policy changes no timing, so changing it does not reschedule.
    missed: object = DEFAULT_MISSED  # "once", "skip" or {"catch_up": N}
    # In spec()/digest() when not UTC: a zone change moves the ticks, so it reschedules (and a schedule
    # declared before zones existed keeps its digest, hence its next run, across the upgrade).
    tz: str = DEFAULT_TZ
    # Not in spec()/digest(): where the definition comes from (a row of the admin: ``stored``), and a pause
    # from the admin (``enabled`` off: its ticks pass without a run, as a pause from the page).
    stored: bool = False
    enabled: bool = True

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
        } | ({"tz": self.tz} if self.tz != DEFAULT_TZ else {})

    def digest(self):
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:16]

    def next_run(self, after):
        """The first run strictly after ``after`` (aware datetime), as an aware UTC datetime. A cron
        schedule runs at the wall-clock times of its zone (``zones``: once across a DST change)."""
        after = after.astimezone(dt.UTC)
        if self.interval:
            return after + dt.timedelta(seconds=self.interval)
        return zones.next_tick(str(self.cron), zones.zone(self.tz), after)

    @property
    def zone(self):
        return zones.zone(self.tz)


def declarations():
    """(where, list) of every schedule declaration: feature apps' ``SCHEDULES``, then settings."""
    found = []
    for app_config, module in queue_declarations.app_modules():
        if hasattr(module, "SCHEDULES"):
            found.append((f"{app_config.label}.queues.SCHEDULES", module.SCHEDULES))
    found.append(("OPTIMA_SCHEDULES", getattr(settings, "OPTIMA_SCHEDULES", [])))
    return found


def declared_entries():
    """{id: (where, entry)} of every declaration; settings override an app's schedule of the same id."""
    conf.raise_first_error(validate_schedules())
    result = {}
    for where, entries in declarations():
        for entry in entries:
            result[entry["id"]] = (where, entry)
    return result


def declared_schedules():
    """Every declared Schedule, by id; settings override an app's schedule of the same id. The schedules
    that run are these with the admin's stored ones over them: ``stored.schedules_in_force``."""
    return [schedule_of(entry, where) for _id, (where, entry) in sorted(declared_entries().items())]


def schedule_of(entry, where, stored=False, enabled=True):
    """The ``Schedule`` of a valid declaration ``entry`` (a dict of ``SCHEDULE_KEYS``)."""
    return Schedule(
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
        tz=entry.get("tz") or DEFAULT_TZ,
        stored=stored,
        enabled=enabled,
    )


def validate_schedules(queue_names=None):
    """Problems of the schedule declarations (check ids queues.E030-E039, docs/checks.md)."""
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
            sid, duplicate = entry.get("id"), False
            if isinstance(sid, str) and sid in seen:
                problems.append(
                    conf.Problem(
                        "queues.E032",
                        f"{label}['id'] {sid!r} is declared twice in {where}.",
                        "Schedule ids must be unique.",
                    )
                )
                duplicate = True
            elif isinstance(sid, str) and SCHEDULE_ID_RE.fullmatch(sid):
                seen.add(sid)
                label = f"{where}[{sid!r}]"
            problems.extend(
                problem for _key, problem in validate_entry(label, entry, queue_names, check_id=not duplicate)
            )
    return problems


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


@django_checks.register(django_checks.Tags.compatibility)
def check_schedules(app_configs=None, **kwargs):
    """System check of the schedule declarations (queues.E030-E039)."""
    return conf.check_messages(validate_schedules())
