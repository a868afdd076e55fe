"""Schedules stored in the database (``queues.models.StoredSchedule``, edited in the admin) and the
schedules in force: the declared ones (settings, apps' ``SCHEDULES``) with the stored rows over them.

A row whose id is a declared schedule's overrides it field by field (a blank field keeps the declared
value): the database wins. Any other row is a schedule of its own. Every row is validated as a declaration
is (``validation.validate_entry``), when saved in the admin and again when read: a row that became invalid
since (its queue was removed from settings) is left out, with an ERROR naming it, and its declared
schedule, if any, runs as declared.

The running scheduler (``run.PeriodicScheduler``) asks ``version()`` at each poll, one indexed query
(the rows' count and latest ``updated_at``), and registers again when it changed: an edit is picked up
within one poll, without a restart. When the database cannot be read the scheduler keeps what it had.
"""

import logging

from django.apps import apps
from django.db import close_old_connections
from django.db.models import Count, Max

from queues import conf
from queues.catalog import queues as queue_declarations
from queues.periodic.declare import declared_entries, schedule_of
from queues.periodic.validation import DEFAULT_MISSED, validate_entry

logger = logging.getLogger("queues.schedules")

FIELDS = ("queue", "func", "args", "kwargs", "cron", "interval", "tz", "missed", "attempts", "timeout")


def _rows():
    # by name, at call time: this package is imported while the apps load (apps.py's ready)
    return apps.get_model("queues", "StoredSchedule").objects.filter(prefix=conf.prefix())


def version():
    """(count, latest updated_at) of this environment's stored schedules: changes with any edit or delete;
    None when the database cannot be read (``_unreadable``)."""
    try:
        found = _rows().aggregate(count=Count("id"), latest=Max("updated_at"))
    except Exception as exc:  # noqa: BLE001 — see _unreadable
        return _unreadable(exc)
    _said.clear()
    return found["count"], found["latest"]


def read_rows():
    """This environment's stored rows, or None when the database cannot be read (``_unreadable``)."""
    try:
        rows = list(_rows())
    except Exception as exc:  # noqa: BLE001 — see _unreadable
        return _unreadable(exc)
    _said.clear()
    return rows


def _unreadable(exc):
    """The database is down, its connection went stale, the table is not migrated yet (or a test gives no
    database): the callers keep what they had, and nothing is removed for it. Said once until it reads again."""
    try:
        close_old_connections()  # a broken connection is opened afresh by the next reading
    except Exception:  # noqa: BLE001, S110 — closing what cannot be used: nothing more to do about it
        pass
    if not _said:
        _said.append(True)
        logger.warning(
            "Stored schedules (the admin's) cannot be read (%s: %s); the scheduler keeps what it had",
            type(exc).__name__,
            str(exc)[:200],
        )
    return None


_said: list = []  # whether the database's unavailability was said (module state: one line per outage)


def missed_of(row):
    """The row's missed-run policy as a declaration says it, or None (blank: keep the declared one)."""
    if not row.missed:
        return None
    if row.missed == "catch_up":
        return {"catch_up": row.catch_up}
    return row.missed


def entry_of(row, declared=None):
    """The declaration (a dict of ``declare.SCHEDULE_KEYS``) of ``row`` over ``declared`` (the declared
    entry of its id, or None): a blank field of the row keeps the declared value."""
    entry = dict(declared or {})
    entry["id"] = row.schedule_id
    given = {
        "queue": row.queue or None,
        "func": row.func or None,
        "args": row.args if row.args not in (None, []) else None,
        "kwargs": row.kwargs if row.kwargs not in (None, {}) else None,
        "tz": row.tz or None,
        "missed": missed_of(row),
        "attempts": row.attempts,
        "timeout": row.timeout,
    }
    entry.update({key: value for key, value in given.items() if value is not None})
    if row.cron or row.interval:  # a new timing replaces the declared one whole
        entry.pop("cron", None)
        entry.pop("interval", None)
        entry.update({"cron": row.cron} if row.cron else {"interval": row.interval})
        if row.interval and not row.tz:
            entry.pop("tz", None)
    return entry


def problems_of(row, queue_names=None, declared=None):
    """[(field, Problem)] of ``row`` as its declaration (``validation.validate_entry``)."""
    if declared is None:
        declared = {sid: entry for sid, (_where, entry) in declared_entries().items()}
    if queue_names is None:
        queue_names = queue_declarations.names()
    entry = entry_of(row, declared.get(row.schedule_id))
    found = validate_entry(f"stored schedule {row.schedule_id!r}", entry, queue_names)
    if row.missed == "catch_up" and not row.catch_up:
        found = [(k, p) for k, p in found if k != "missed"]
        found.append(
            (
                "catch_up",
                conf.Problem(
                    "queues.E037", f"stored schedule {row.schedule_id!r}: the catch-up policy needs N.", "E.g. 5."
                ),
            )
        )
    return found


def schedules_in_force(rows=None):
    """Every schedule that runs, by id: the declared ones with the stored rows over them (the database wins).
    ``rows``: the stored rows, read here when not given (none when the database cannot be read)."""
    if rows is None:
        rows = read_rows() or []
    declared = declared_entries()
    result = {sid: schedule_of(entry, where) for sid, (where, entry) in declared.items()}
    queue_names = queue_declarations.names()
    for row in rows:
        origin = declared.get(row.schedule_id)
        problems = problems_of(row, queue_names, {sid: entry for sid, (_where, entry) in declared.items()})
        if problems:
            logger.error(
                "Stored schedule %r left out (%s); %s",
                row.schedule_id,
                problems[0][1].msg,
                "its declared schedule runs as declared" if origin else "it does not run",
            )
            continue
        entry = entry_of(row, origin[1] if origin else None)
        entry.setdefault("missed", DEFAULT_MISSED)
        where = f"the admin, over {origin[0]}" if origin else "the admin"
        result[row.schedule_id] = schedule_of(entry, where, stored=True, enabled=row.enabled)
    return [result[k] for k in sorted(result)]
