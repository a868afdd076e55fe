"""Dead letters: jobs that will not be retried, kept in Redis and mirrored into the database.

Lifecycle (docs/lifecycle.md): attempt -> backoff -> ... -> dead. A dead job

- stays in RQ's FailedJobRegistry ``<prefix>:failed:<queue>`` with no expiry (the queue's
  ``failure_ttl``, -1 by default), its hash ``<prefix>:job:<id>`` and its results stream
  ``<prefix>:results:<id>`` (every attempt's traceback) kept with it;
- is mirrored into one ``queues.DeadLetter`` row per (prefix, job id), for investigation in the admin;
- is then retried (requeued: same job id, a fresh set of attempts) or discarded by an operator.

The mirror is idempotent: ``job.meta["deaths"]`` counts the job's deaths, the row's ``times_dead``
the deaths it has seen. The same death mirrored twice updates the row in place; a job that an
operator retried and that died again reopens its row (``status = open``, ``times_dead + 1``).

Each row carries the ``fingerprint`` of its failure (``queues/failures/fingerprint.py``) and counts, in the
same transaction, in its ``FailureGroup`` (deaths seen, first and last seen, queues, latest example):
``_count_death``. Rows written without a fingerprint (by the previous release during a deploy) are
grouped by ``reconcile``.

The database may be down when a job dies: the mirror logs and carries on, never failing the worker.
``reconcile()`` (``manage.py queues_reconcile``, and every worker's maintenance at most every
``RECONCILE_INTERVAL`` seconds) brings the table back in line with Redis: failed-registry jobs missing
from the table are mirrored; open rows whose job left the failed registry some other way are marked
``retried`` (requeued, e.g. from django-rq's dashboard) or ``discarded`` (deleted).
"""
import datetime as dt
import json
import logging
from dataclasses import dataclass, field

from django.db import IntegrityError, transaction
from rq.job import JobStatus
from rq.registry import FailedJobRegistry

from queues import conf, keys

from queues.worker import signals as events

from queues.jobs import meta as jobmeta
from queues.failures.fingerprint import MESSAGE_LIMIT, PATTERN_LIMIT, fingerprint, pattern
from queues.failures.retry import exc_summary

logger = logging.getLogger("queues.deadletter")  # a documented logger name: kept when the module moved

WAITING_OR_RUNNING = {
    JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.FINISHED,
}


def _now():
    return dt.datetime.now(dt.timezone.utc)


def _parse(value):
    if not value:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    try:
        parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def mark_dead(job, reason, *, exc_type="", exc_message="", worker_name=""):
    """Record a death in ``job.meta`` (not saved: the caller saves it with its other writes)."""
    jobmeta.mark_dead(job.meta, reason, attempt=jobmeta.current_attempt(job), exc_type=exc_type, exc_message=exc_message,
                      worker_name=worker_name, now=_now())


def keep_forever(job, connection=None):
    """Score a dead job of ``failure_ttl`` -1 at +inf in its failed registry. RQ 3.0's
    ``FailedJobRegistry.add`` writes -1 itself: its cleanup (scores 0..now) spares it, but dashboards
    then show it as expired in 1969."""
    if job.failure_ttl is not None and job.failure_ttl < 0:
        connection = connection if connection is not None else job.connection
        connection.zadd(FailedJobRegistry(job.origin, connection=job.connection).key, {job.id: "+inf"}, xx=True)


def bury(job, *, reason, exc_string="", worker_name=""):
    """Make ``job`` a dead letter: into its FailedJobRegistry (the job's ``failure_ttl``, -1 = no
    expiry) unless already there, then mirrored. For paths outside a worker's failure handling —
    e.g. a job abandoned by a killed worker with no attempts left. Does not touch the started
    registry or the queue. Sends ``job_dead``. Returns the DeadLetter row (None if the database
    could not be written; ``reconcile`` catches up)."""
    from rq.results import Result

    job.get_meta(refresh=True)
    registry = FailedJobRegistry(job.origin, connection=job.connection, job_class=type(job),
                                 serializer=job.serializer)
    already = job.meta.get("dead") and job.id in registry
    if not already:
        exc_type, exc_message = exc_summary(None, exc_string)
        mark_dead(job, reason, exc_type=exc_type, exc_message=exc_message, worker_name=worker_name)
        ttl = job.failure_ttl if job.failure_ttl is not None else -1
        job.ended_at = job.ended_at or _now()
        with job.connection.pipeline() as pipeline:
            job.set_status(JobStatus.FAILED, pipeline=pipeline)
            job.save(pipeline=pipeline)  # meta included
            registry.add(job, ttl=ttl, exc_string=exc_string, pipeline=pipeline)
            Result.create_failure(job, ttl, exc_string=exc_string, worker_name=worker_name, pipeline=pipeline)
            keep_forever(job, pipeline)
            pipeline.execute()
        logger.warning("Job %s (%s) is dead (%s)", job.id, jobmeta.queue_name(job), reason)
        events.send(events.job_dead, queue=jobmeta.queue_name(job), job=job, reason=reason)
    return mirror(job, exc_string=exc_string)


def _latest_exc_string(job):
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
    traceback = exc_string or _latest_exc_string(job)
    exc_type, exc_message = meta.get("exc_type"), meta.get("exc_message")
    if not exc_type and not exc_message:
        exc_type, exc_message = exc_summary(None, traceback)
    try:
        func_path, args, kwargs = job.func_name or "", list(job.args or ()), dict(job.kwargs or {})
    except Exception:  # noqa: BLE001 — a payload that cannot be read is exactly what to investigate
        func_path, args, kwargs = "<unreadable payload>", [], {}
    dead_at = _parse(meta.get("dead_at")) or _now()
    func_path, exc_type, exc_message = short_text(func_path, 500), short_text(exc_type, 300), short_text(exc_message)
    return {
        "queue": jobmeta.queue_name(job),
        "func_path": func_path,
        "args": args,
        "kwargs": kwargs,
        "exc_type": exc_type,
        "exc_message": exc_message,
        "fingerprint": fingerprint(func_path, exc_type, exc_message),
        "traceback": short_text(traceback),
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


def carried_of(job, meta):
    """What the admin's retry of this job carries over when the job is no longer in Redis (the row
    is then all there is): its owner and its limit key. JSON text, '' when there is nothing."""
    from queues.producer import limits

    carried = {}
    if isinstance(meta.get(jobmeta.OWNER), str):
        carried["owner"] = meta[jobmeta.OWNER]
    if limits.is_limited(job):
        carried["limit_key"] = limits.split(job.rate_limit_key)[1]
        carried["limit_concurrency"] = job.rate_limit_concurrency
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
        return _mirror(job, row_values(job, exc_string))
    except Exception:  # noqa: BLE001 — the worker must go on whatever the database does
        logger.exception("Could not mirror dead job %s into the DeadLetter table; "
                         "manage.py queues_reconcile will", job.id)
        return None


def _mirror(job, values):
    from queues.models import DeadLetter

    prefix = conf.prefix()
    for _ in range(2):
        try:
            with transaction.atomic():
                row = DeadLetter.objects.select_for_update().filter(prefix=prefix, job_id=job.id).first()
                if row is None:
                    row = DeadLetter.objects.create(prefix=prefix, job_id=job.id, status=DeadLetter.Status.OPEN,
                                                    **values)
                    _count_death(row, row.times_dead)
                    return row
                if values["times_dead"] > row.times_dead:
                    row.status = DeadLetter.Status.OPEN  # died again after an operator's retry
                    row.retried_as = ""
                elif row.status != DeadLetter.Status.OPEN:
                    return row  # this death was already handled by an operator
                before, grouped_as = row.times_dead, row.fingerprint
                for key, value in values.items():
                    setattr(row, key, value)
                row.save()
                if not grouped_as:  # a row of the previous release: none of its deaths counted yet
                    _count_death(row, row.times_dead)
                elif row.fingerprint != grouped_as:  # died differently this time: a death of another group
                    _count_death(row, max(1, row.times_dead - before))
                elif row.times_dead > before:
                    _count_death(row, row.times_dead - before)
                return row
        except IntegrityError:
            continue  # a concurrent mirror created the row or the group: do it again over theirs
    raise RuntimeError(f"could not upsert the DeadLetter row of job {job.id}")


def _count_death(row, deaths):
    """Count ``deaths`` deaths of ``row`` in its FailureGroup, created at its first death; the latest
    death's row is the group's example. In the caller's transaction; the group row is locked
    (select_for_update) so concurrent deaths of one group add up. Raises IntegrityError when a
    concurrent first death created the same group: the caller runs its transaction again."""
    from queues.models import FailureGroup

    group = FailureGroup.objects.select_for_update().filter(prefix=row.prefix, fingerprint=row.fingerprint).first()
    if group is None:
        return FailureGroup.objects.create(
            prefix=row.prefix, fingerprint=row.fingerprint, func_path=row.func_path, exc_type=row.exc_type,
            pattern=pattern(row.exc_message)[:PATTERN_LIMIT], example_message=row.exc_message[:MESSAGE_LIMIT],
            example=row, count=deaths, first_seen=row.dead_at, last_seen=row.dead_at, queues=[row.queue])
    group.count += deaths
    group.first_seen = min(group.first_seen, row.dead_at)
    if row.dead_at >= group.last_seen:
        group.last_seen, group.example, group.example_message = row.dead_at, row, row.exc_message[:MESSAGE_LIMIT]
    if row.queue not in group.queues:
        group.queues = sorted([*group.queues, row.queue])
    group.save()
    return group


def _group_ungrouped(prefix, chunk):
    """Fingerprint and count the rows written without a fingerprint (the previous release's workers,
    during a deploy); returns how many. One short transaction per row, like ``_mirror``."""
    from queues.models import DeadLetter

    grouped, failed = 0, set()
    while True:
        pks = list(DeadLetter.objects.filter(prefix=prefix, fingerprint="").exclude(pk__in=failed)
                   .order_by().values_list("pk", flat=True)[:chunk])
        if not pks:
            return grouped
        for pk in pks:
            for attempt in range(2):
                try:
                    with transaction.atomic():
                        row = DeadLetter.objects.select_for_update().filter(pk=pk, fingerprint="").first()
                        if row is not None:
                            row.fingerprint = fingerprint(row.func_path, row.exc_type, row.exc_message)
                            row.save(update_fields=["fingerprint"])
                            _count_death(row, row.times_dead)
                            grouped += 1
                    break
                except IntegrityError:
                    if attempt:
                        failed.add(pk)
                        logger.exception("reconcile: could not group dead letter %s", pk)


@dataclass
class ReconcileSummary:
    queues: list = field(default_factory=list)
    mirrored: int = 0  # failed-registry jobs added to (or reopened in) the table
    retried: int = 0  # open rows whose job was requeued outside the admin
    discarded: int = 0  # open rows whose job no longer exists
    errors: int = 0
    grouped: int = 0  # rows without a fingerprint (the previous release's) put in their FailureGroup

    def __str__(self):
        return (f"{self.mirrored} mirrored, {self.retried} marked retried, {self.discarded} marked discarded"
                f" ({len(self.queues)} queues, {self.errors} errors)")


def _known_queue_names(connection):
    """Declared queues, queues rq knows of in Redis, and queues of open rows. A queue name in Redis
    that is not UTF-8 (or a registry set of the wrong type) is skipped with an ERROR."""
    import redis
    from rq import Queue

    from queues.models import DeadLetter
    from queues.catalog.lookup import queue_names

    names = set(queue_names())
    try:
        members = connection.smembers(Queue.redis_queues_keys)
    except redis.ResponseError as exc:
        logger.error("reconcile: %s is not a set (%s): only declared queues reconciled", Queue.redis_queues_keys, exc)
        members = set()
    prefix = Queue.redis_queue_namespace_prefix
    for member in members:
        try:
            key = member.decode("utf-8")
        except UnicodeDecodeError:
            logger.error("reconcile: skipped queue key %r of %s: not UTF-8", member, Queue.redis_queues_keys)
            continue
        if key.startswith(prefix):
            names.add(key[len(prefix):])
    names.update(DeadLetter.objects.filter(prefix=conf.prefix(), status=DeadLetter.Status.OPEN)
                 .values_list("queue", flat=True).distinct())
    return sorted(names)


def reconcile(queue_names=None, connection=None, chunk=500):
    """Bring the DeadLetter table in line with the failed registries; returns a ReconcileSummary.

    Cost: one pass over each failed registry and over the open rows of each queue, in chunks.
    Poison never stops it: a failed entry whose hash cannot be read as a job is mirrored as a
    ``corrupt`` row (``bury_corrupt``, the raw hash kept); an id that is not UTF-8, a key that is not
    a hash, a hash without ``data`` and a failed registry that is not a sorted set are skipped with
    an ERROR naming the key; an open row whose job is corrupt stays open. Last, rows without a
    fingerprint are grouped (``_group_ungrouped``: an index range, empty but during a deploy).
    """
    import redis

    from queues.jobs import read as jobread
    from queues.connection.clients import get_connection
    from queues.models import DeadLetter

    connection = connection or get_connection()
    prefix = conf.prefix()
    summary = ReconcileSummary(queues=list(queue_names) if queue_names else _known_queue_names(connection))

    def failed_ids_of(name):
        key = keys.failed_key(name)
        try:
            raw_ids = connection.zrange(key, 0, -1)
        except redis.ResponseError as exc:
            logger.error("reconcile: skipped queue %s: its failed registry %s is not a sorted set (%s)", name, key, exc)
            return None
        ids = [jobread.normal_id(raw) for raw in raw_ids]
        for raw in (i for i in ids if isinstance(i, bytes)):
            logger.error("reconcile: skipped entry %s of %s: its job id is not UTF-8", jobread.text(raw), key)
        return [i for i in ids if isinstance(i, str)]

    def mirror_corrupt(name, job):
        if job.kind in ("wrong_type", "no_data"):
            logger.error("reconcile: skipped failed job %s of %s: %s (key %s)", job.id, name, job.why,
                         jobread.job_key(job.id))
        elif bury_corrupt(connection, job.id, name, dict(job.fields), job.why) is not None:
            summary.mirrored += 1
        else:
            summary.errors += 1

    def mirror_failed(job_id, job, seen):
        meta = job.meta
        if not meta.get("dead"):
            # Failed by a path that did not mark it (RQ's own abandoned-job cleanup, a job from
            # before this code): record the death on the job so a later life counts from it.
            meta["dead"] = "abandoned" if "AbandonedJobError" in _latest_exc_string(job) else "exhausted"
            meta.setdefault("dead_at", (job.ended_at or _now()).isoformat())
            meta["deaths"] = max(int(meta.get("deaths") or 0), seen.get(job_id, 0) + 1 if job_id in seen else 1)
            try:
                job.save_meta()
            except Exception:  # noqa: BLE001
                logger.warning("Could not save dead-letter meta of job %s", job_id)
        if job_id in seen and int(meta.get("deaths") or 1) <= seen[job_id]:
            return  # the operator already dealt with this death
        try:
            _mirror(job, row_values(job))
            summary.mirrored += 1
        except Exception:  # noqa: BLE001
            summary.errors += 1
            logger.exception("reconcile: could not mirror dead job %s", job_id)

    for name in summary.queues:
        failed_ids = failed_ids_of(name)
        if failed_ids is None:
            continue  # its open rows too: whether their jobs are still failed cannot be told
        failed_set = set(failed_ids)  # less the entries whose hash is gone (their open rows: discarded)
        for start in range(0, len(failed_ids), chunk):
            ids = failed_ids[start:start + chunk]
            seen = dict(DeadLetter.objects.filter(prefix=prefix, job_id__in=ids)
                        .values_list("job_id", "times_dead"))
            open_ids = set(DeadLetter.objects.filter(prefix=prefix, job_id__in=ids, status=DeadLetter.Status.OPEN)
                           .values_list("job_id", flat=True))
            for job_id, job in zip(ids, jobread.fetch_many(ids, connection, check_origin=False)):
                if job is None:
                    failed_set.discard(job_id)
                if job is None or job_id in open_ids:
                    continue
                if jobread.is_corrupt(job):
                    if job_id not in seen:
                        mirror_corrupt(name, job)
                    continue
                mirror_failed(job_id, job, seen)
        open_rows = DeadLetter.objects.filter(prefix=prefix, queue=name, status=DeadLetter.Status.OPEN)
        gone = [jid for jid in open_rows.values_list("job_id", flat=True).iterator(chunk_size=chunk)
                if jid not in failed_set]
        for start in range(0, len(gone), chunk):
            ids = gone[start:start + chunk]
            jobs = jobread.fetch_many(ids, connection, check_origin=False)
            retried = [jid for jid, job in zip(ids, jobs) if job is not None and not jobread.is_corrupt(job)
                       and job.get_status(refresh=False) in WAITING_OR_RUNNING]
            corrupt = {jid for jid, job in zip(ids, jobs) if jobread.is_corrupt(job)}
            discarded = [jid for jid in ids if jid not in set(retried) and jid not in corrupt]
            if retried:
                summary.retried += DeadLetter.objects.filter(
                    prefix=prefix, job_id__in=retried, status=DeadLetter.Status.OPEN
                ).update(status=DeadLetter.Status.RETRIED, updated_at=_now())
            if discarded:
                summary.discarded += DeadLetter.objects.filter(
                    prefix=prefix, job_id__in=discarded, status=DeadLetter.Status.OPEN
                ).update(status=DeadLetter.Status.DISCARDED, updated_at=_now())
    summary.grouped = _group_ungrouped(prefix, chunk)
    return summary


def reconcile_if_due(connection=None):
    """Run ``reconcile()`` unless another process did within ``RECONCILE_INTERVAL`` seconds (a Redis
    key with that expiry is the lock). Never raises: called from worker maintenance."""
    from queues.connection.clients import get_connection

    interval = int(conf.options().get("RECONCILE_INTERVAL", 300))
    if interval <= 0:
        return None
    key = keys.reconcile_key()
    try:
        connection = connection or get_connection()
        if not connection.set(key, _now().isoformat(), nx=True, ex=interval):
            return None
        summary = reconcile(connection=connection)
    except Exception:  # noqa: BLE001
        logger.exception("Dead-letter reconcile failed; the next maintenance will try again")
        try:
            connection.delete(key)  # e.g. the database is down: let the next maintenance try at once
        except Exception:  # noqa: BLE001
            pass
        return None
    if summary.mirrored or summary.retried or summary.discarded or summary.errors or summary.grouped:
        logger.info("Dead-letter reconcile: %s, %d grouped", summary, summary.grouped)
    return summary


# -- corrupt jobs -------------------------------------------------------------------------------
CORRUPT = "corrupt"


def encode_raw_hash(fields):
    """A job hash as HGETALL gave it (bytes -> bytes) -> JSON text ``[[field, value], ...]``, every
    name and value base64-encoded: lossless, and storable in any text column."""
    import base64
    import json

    return json.dumps([[base64.b64encode(k).decode(), base64.b64encode(v).decode()]
                       for k, v in sorted((fields or {}).items())])


def decode_raw_hash(text):
    """The inverse of ``encode_raw_hash``: [(field bytes, value bytes), ...] ([] for '')."""
    import base64
    import json

    return [(base64.b64decode(k), base64.b64decode(v)) for k, v in (json.loads(text) if text else [])]


def bury_corrupt(connection, job_id, queue_name, fields, why, worker_name=""):
    """Dead-letter a job whose hash cannot be read as a job (reason ``corrupt``): its id goes into
    its queue's failed registry with no expiry (its hash is left exactly as it was, nothing in it
    decoded), and its row keeps the raw hash (``encode_raw_hash``). Never raises for the database
    (logged; reconcile catches up). Returns the row or None."""
    from queues.models import DeadLetter

    prefix = conf.prefix()
    connection.zadd(keys.failed_key(queue_name), {job_id: "+inf"})
    logger.error("Job %s (%s) is dead (corrupt): its hash %s %s", job_id, queue_name, keys.job_key(job_id), why)
    now = _now()
    values = {
        "queue": queue_name[:200], "func_path": "<corrupt job>", "args": [], "kwargs": {}, "exc_type": "CorruptJob",
        "exc_message": why, "traceback": "", "attempts_made": 0, "attempts_allowed": 0, "reason": CORRUPT,
        "enqueued_at": None, "first_failed_at": now, "dead_at": now, "worker": worker_name[:300], "times_dead": 1,
        "raw_hash": encode_raw_hash(fields), "fingerprint": fingerprint("<corrupt job>", "CorruptJob", why),
    }
    try:
        for attempt in range(2):
            try:
                with transaction.atomic():  # the row and its group together
                    row = DeadLetter.objects.select_for_update().filter(prefix=prefix, job_id=job_id).first()
                    if row is None:
                        row = DeadLetter.objects.create(prefix=prefix, job_id=job_id, **values)
                        _count_death(row, 1)
                    elif row.status != DeadLetter.Status.OPEN or row.reason != CORRUPT:
                        for key, value in values.items():
                            setattr(row, key, value)
                        row.status = DeadLetter.Status.OPEN
                        row.save()
                        _count_death(row, 1)
                    return row
            except IntegrityError:
                if attempt:  # a concurrent bury created the row or the group: once more over theirs
                    raise
    except Exception:  # noqa: BLE001 — the worker must go on whatever the database does
        logger.exception("Could not mirror corrupt job %s into the DeadLetter table", job_id)
        return None
