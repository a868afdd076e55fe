"""Declared schedules: where they are declared (feature apps' ``SCHEDULES``, then ``OPTIMA_SCHEDULES``),
their validation (system checks queues.E030-E039, each declaration through ``validation.validate_entry``;
``declared_schedules`` refuses the same problems at start-up) and the ``Schedule`` each declaration becomes.
Redis is not read here.
"""

import datetime as dt
import hashlib
import json
from dataclasses import dataclass, field

from django.conf import settings
from django.core import checks as django_checks

from queues import conf
from queues.catalog import queues as queue_declarations  # aliased: declarations() below lists the schedules'
from queues.periodic import zones
from queues.periodic.validation import (  # noqa: F401  (names callers import from here)
    DEFAULT_MISSED,
    DEFAULT_TZ,
    MAX_CATCH_UP,
    MISSED_POLICIES,
    SCHEDULE_ID_RE,
    SCHEDULE_KEYS,
    function_path,
    task_of,
    validate_entry,
)

TEMPLATE_PREFIX = "schedule-"


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


@django_checks.register(django_checks.Tags.compatibility)
def check_schedules(app_configs=None, **kwargs):
    """System check of the schedule declarations (queues.E030-E039)."""
    return conf.check_messages(validate_schedules())
