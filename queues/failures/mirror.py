"""The ``DeadLetter`` row of a dead job, and the count of its death in its ``FailureGroup``.

``row_values`` reads the row's fields off the job (and the meta ``deadletter.mark_dead`` wrote);
``mirror`` upserts the row and never raises (a database outage is logged, ``reconcile`` catches up);
``upsert`` is the idempotent write both it and ``reconcile`` use: ``job.meta["deaths"]`` counts the
job's deaths, the row's ``times_dead`` the deaths it has seen, so the same death mirrored twice updates
the row in place, and a job that died again after an operator's retry reopens its row. A job an operator
stopped (reason ``stopped``) gets a row ``stopped`` ("stopped by an operator"), not ``open``: it waits for
nobody, and can still be retried (or requeued or deleted from the panel).
``count_death`` adds deaths to the row's failure group in the same transaction.

A row's size is bounded whatever the job held (``queues/keyspace/entries.py`` lists the caps): the traceback
and the exception message are cut at ``entries.TEXT_CHARS`` with a visible "truncated" marker, the
arguments past ``entries.ARGS_CHARS`` characters of JSON are kept as the start of that JSON only
(``capped_arguments``; ``args_cut`` tells such a row, whose job cannot be rebuilt from it), an owner or
a limit key longer than ``CARRIED_CHARS`` is not carried.
"""

import datetime as dt
import json
import logging

from django.db import IntegrityError, transaction

from queues import conf
from queues.failures.fingerprint import MESSAGE_LIMIT, PATTERN_LIMIT, fingerprint, pattern
from queues.failures.retry import STOPPED, exc_summary
from queues.jobs import meta as jobmeta
from queues.keyspace import entries
from queues.models import DeadLetter, FailureGroup
from queues.producer import limits

logger = logging.getLogger("queues.deadletter")  # a documented logger name: kept when the module moved

# What a row keeps of what the job held (entries.py lists every cap): arguments past ARGS_CHARS of JSON
# keep ARGS_PREVIEW characters under the key ARGS_CUT (not a Python name: no function takes it as a
# keyword), an owner longer than CARRIED_CHARS is not carried.
ARGS_CUT = "(arguments truncated)"
ARGS_PREVIEW = 2 * 1024
CARRIED_CHARS = 200


def now():
    return dt.datetime.now(dt.UTC)


def _parse(value):
    if not value:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def latest_exc_string(job):
    """The traceback of the job's latest result ('' when there is none or it cannot be read)."""
    try:
        result = job.latest_result()
    except Exception:  # noqa: BLE001 — an unreadable result only costs the traceback
        return ""
    return (result.exc_string or "") if result is not None else ""


def row_values(job, exc_string=""):
    """The DeadLetter fields of a dead job (from the job and the meta ``mark_dead`` wrote). Never
    raises for what the job holds: a value of the wrong type reads as missing."""

    def number(value, default):
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            return default

    def short_text(value, limit=None):
        value = value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value
        value = value if isinstance(value, str) else ("" if value is None else str(value))
        return value[:limit] if limit else value

    meta = job.meta if isinstance(job.meta, dict) else {}
    traceback = entries.cut(short_text(exc_string or latest_exc_string(job)))
    exc_type, exc_message = meta.get("exc_type"), meta.get("exc_message")
    if not exc_type and not exc_message:
        exc_type, exc_message = exc_summary(None, traceback)
    try:
        func_path, args, kwargs = job.func_name or "", list(job.args or ()), dict(job.kwargs or {})
    except Exception:  # noqa: BLE001 — a payload that cannot be read is exactly what to investigate
        func_path, args, kwargs = "<unreadable payload>", [], {}
    args, kwargs = capped_arguments(args, kwargs)
    dead_at = _parse(meta.get("dead_at")) or now()
    func_path, exc_type = short_text(func_path, 500), short_text(exc_type, 300)
    exc_message = entries.cut(short_text(exc_message))
    return {
        "queue": jobmeta.queue_name(job),
        "func_path": func_path,
        "args": args,
        "kwargs": kwargs,
        "exc_type": exc_type,
        "exc_message": exc_message,
        "fingerprint": fingerprint(func_path, exc_type, exc_message),
        "traceback": traceback,
        "attempts_made": number(meta.get("attempts_made"), 0) or jobmeta.current_attempt(job),
        "attempts_allowed": number(meta.get("attempts_allowed"), 0),
        "reason": (meta.get("dead") if isinstance(meta.get("dead"), str) else "") or "",
        "enqueued_at": job.enqueued_at,
        "first_failed_at": _parse(meta.get("first_failed_at")) or dead_at,
        "dead_at": dead_at,
        "worker": short_text(meta.get("dead_worker") or job.worker_name, 300),
        "times_dead": max(1, number(meta.get("deaths"), 1)),
        "carried": carried_of(job, meta),
    }


def capped_arguments(args, kwargs):
    """``(args, kwargs)`` as the row keeps them: as they are up to ``entries.ARGS_CHARS`` characters of
    JSON; past it, no arguments and ``kwargs`` ``{ARGS_CUT: "<the start of the JSON>… (truncated: ...)"}``
    (``args_cut`` tells such a row: its job cannot be rebuilt from it)."""
    try:
        shown = json.dumps([args, kwargs], default=repr)
    except (TypeError, ValueError):  # e.g. nested too deep: nothing of it is kept
        shown = repr([args, kwargs])
    if len(shown) <= entries.ARGS_CHARS:
        return args, kwargs
    return [], {ARGS_CUT: entries.cut(shown, ARGS_PREVIEW)}


def args_cut(row):
    """Whether ``row`` kept only the start of its job's arguments (``capped_arguments``)."""
    return isinstance(row.kwargs, dict) and ARGS_CUT in row.kwargs


def carried_of(job, meta):
    """What the admin's retry of this job carries over when the job is no longer in Redis (the row
    is then all there is): its owner, its limit key, its priority (its band) and its batch. JSON text, '' when
    there is nothing."""

    carried = {}
    if isinstance(meta.get(jobmeta.OWNER), str) and len(meta[jobmeta.OWNER]) <= CARRIED_CHARS:
        carried["owner"] = meta[jobmeta.OWNER]
    if limits.is_limited(job) and len(str(job.rate_limit_key)) <= CARRIED_CHARS:
        carried["limit_key"] = limits.split(job.rate_limit_key)[1]
        carried["limit_concurrency"] = job.rate_limit_concurrency
    if jobmeta.priority(job):
        carried["priority"] = jobmeta.priority(job)
    if isinstance(meta.get(jobmeta.BATCH), str) and len(meta[jobmeta.BATCH]) <= CARRIED_CHARS:
        carried["batch"] = meta[jobmeta.BATCH]  # the new job takes its place in the batch (scripts.take_over)
    return json.dumps(carried, sort_keys=True) if carried else ""


def carried(row):
    """``carried_of``'s dict back from a row ({} for '' or anything unreadable)."""
    try:
        value = json.loads(row.carried) if row.carried else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def mirror(job, exc_string=""):
    """Upsert the job's DeadLetter row; never raises (a database outage is logged, reconcile catches
    up). Returns the row, or None."""
    try:
        return upsert(job, row_values(job, exc_string))
    except Exception:  # noqa: BLE001 — the worker must go on whatever the database does
        logger.exception(
            "Could not mirror dead job %s into the DeadLetter table; manage.py queues_reconcile will", job.id
        )
        return None


def upsert(job, values):
    """Write ``values`` (``row_values``) as the job's DeadLetter row and count the deaths it had not
    seen; returns the row. Raises for the database (``mirror`` logs, ``reconcile`` counts an error)."""

    prefix = conf.prefix()
    status = opened_as(values)
    for _ in range(2):
        try:
            with transaction.atomic():
                row = DeadLetter.objects.select_for_update().filter(prefix=prefix, job_id=job.id).first()
                if row is None:
                    row = DeadLetter.objects.create(prefix=prefix, job_id=job.id, status=status, **values)
                    count_death(row, row.times_dead)
                    return row
                if values["times_dead"] > row.times_dead:
                    row.status = status  # died again after an operator's retry
                    row.retried_as = ""
                elif row.status != DeadLetter.Status.OPEN:
                    return row  # this death was already handled by an operator
                row.only_in_database_since = None  # its job is in Redis: not held only in the database
                before, grouped_as = row.times_dead, row.fingerprint
                for key, value in values.items():
                    setattr(row, key, value)
                row.save()
                if not grouped_as:  # a row of the previous release: none of its deaths counted yet
                    count_death(row, row.times_dead)
                elif row.fingerprint != grouped_as:  # died differently this time: a death of another group
                    count_death(row, max(1, row.times_dead - before))
                elif row.times_dead > before:
                    count_death(row, row.times_dead - before)
                return row
        except IntegrityError:
            continue  # a concurrent mirror created the row or the group: do it again over theirs
    raise RuntimeError(f"could not upsert the DeadLetter row of job {job.id}")


def opened_as(values):
    """The status a death's row starts in: ``stopped`` when an operator stopped the running job (the panel's
    Stop, rq's stop-job command: reason ``stopped``), which then waits for nobody; else ``open``."""
    return DeadLetter.Status.STOPPED if values.get("reason") == STOPPED else DeadLetter.Status.OPEN


def count_death(row, deaths):
    """Count ``deaths`` deaths of ``row`` in its FailureGroup, created at its first death; the latest
    death's row is the group's example. In the caller's transaction; the group row is locked
    (select_for_update) so concurrent deaths of one group add up. Raises IntegrityError when a
    concurrent first death created the same group: the caller runs its transaction again."""

    group = FailureGroup.objects.select_for_update().filter(prefix=row.prefix, fingerprint=row.fingerprint).first()
    if group is None:
        return FailureGroup.objects.create(
            prefix=row.prefix,
            fingerprint=row.fingerprint,
            func_path=row.func_path,
            exc_type=row.exc_type,
            pattern=pattern(row.exc_message)[:PATTERN_LIMIT],
            example_message=row.exc_message[:MESSAGE_LIMIT],
            example=row,
            count=deaths,
            first_seen=row.dead_at,
            last_seen=row.dead_at,
            queues=[row.queue],
        )
    group.count += deaths
    group.first_seen = min(group.first_seen, row.dead_at)
    if row.dead_at >= group.last_seen:
        group.last_seen, group.example, group.example_message = row.dead_at, row, row.exc_message[:MESSAGE_LIMIT]
    if row.queue not in group.queues:
        group.queues = sorted([*group.queues, row.queue])
    group.save()
    return group
