"""Reconcile: the DeadLetter table brought back in line with Redis's failed registries.

The database may be down when a job dies: the mirror logs and carries on. ``reconcile()``
(``manage.py queues_reconcile``, and every worker's maintenance at most every ``RECONCILE_INTERVAL``
seconds through ``reconcile_if_due``) then catches up, queue by queue:

1. failed-registry jobs missing from the table are mirrored (a corrupt one through ``bury_corrupt``);
   a job whose signature does not verify (the current key or ``QUEUE_SIGNING_OLD_KEYS``, as the
   worker's gate checks) is mirrored as ``unverified`` (``unverified_values``): anyone who can write
   to Redis can plant a failed entry, and a row copied from it as it claims to be would later be
   retried as a new, signed job;
2. open rows whose job left the failed registry some other way are marked ``retried`` (requeued,
   e.g. from django-rq's dashboard); those whose job is gone from Redis stay open, marked as held only in
   the database (``only_in_database_since``): a Redis that lost its data (a restart without persistence,
   a flush, a failover that lost writes) must not close dead letters no operator looked at. The row is
   the durable record: its retry re-enqueues the job from it. Only an operator's discard (audited, in
   ``operations``) closes a dead letter. A job found again clears the mark;
3. last, rows written without a fingerprint (the previous release's workers, during a deploy) are
   put in their ``FailureGroup``.

Each step returns what it did as counts; ``reconcile`` adds them up into a ``ReconcileSummary``.
"""

import logging
from collections import Counter
from dataclasses import dataclass, field

import redis
from django.db import IntegrityError, transaction
from rq import Queue
from rq.job import JobStatus

from queues import conf
from queues.catalog import queues as declarations
from queues.catalog.lookup import queue_names
from queues.connection import servers
from queues.connection.clients import get_connection
from queues.failures.corrupt import bury_corrupt
from queues.failures.fingerprint import fingerprint
from queues.failures.mirror import count_death, latest_exc_string, now, row_values, upsert
from queues.failures.unverified import UNVERIFIED, unverified_values, verified
from queues.jobs import read as jobread
from queues.keyspace import keys, repeats
from queues.models import DeadLetter

logger = logging.getLogger("queues.deadletter")  # a documented logger name: kept when the module moved

WAITING_OR_RUNNING = {
    JobStatus.QUEUED,
    JobStatus.SCHEDULED,
    JobStatus.STARTED,
    JobStatus.DEFERRED,
    JobStatus.FINISHED,
}


@dataclass
class ReconcileSummary:
    queues: list = field(default_factory=list)
    mirrored: int = 0  # failed-registry jobs added to (or reopened in) the table
    retried: int = 0  # open rows whose job was requeued outside the admin
    held: int = 0  # open rows whose job no longer exists in Redis, newly marked held only in the database
    errors: int = 0
    grouped: int = 0  # rows without a fingerprint (the previous release's) put in their FailureGroup

    def __str__(self):
        return (
            f"{self.mirrored} mirrored, {self.retried} marked retried, {self.held} held only in the database"
            f" ({len(self.queues)} queues, {self.errors} errors)"
        )


def reconcile(queue_names=None, connection=None, chunk=500, server=None):
    """Bring the DeadLetter table in line with the failed registries; returns a ReconcileSummary.

    Cost: one pass over each failed registry and over the open rows of each queue, in chunks.
    Poison never stops it: a failed entry whose hash cannot be read as a job is mirrored as a
    ``corrupt`` row (``bury_corrupt``, the raw hash kept); an id that is not UTF-8, a key that is not
    a hash, a hash without ``data`` and a failed registry that is not a sorted set are skipped with
    an ERROR naming the key; an open row whose job is corrupt stays open. Last, rows without a
    fingerprint are grouped (``group_ungrouped``: an index range, empty but during a deploy).

    Several Redis servers (QUEUES_REDIS_SERVERS): a queue's dead jobs are in its own server's failed registry, so
    ``connection`` (the server named ``server``, default the default one) reconciles only the queues living there
    (an undeclared one: on the default server); without a connection every server is reconciled in turn.
    """

    if connection is None and servers.several():
        done = [reconcile(queue_names, get_connection(name), chunk, name) for name in servers.names()]
        return ReconcileSummary(
            queues=[q for summary in done for q in summary.queues],
            **{f: sum(getattr(summary, f) for summary in done) for f in ("mirrored", "retried", "held", "errors")},
            grouped=sum(summary.grouped for summary in done),
        )
    connection = connection or get_connection()
    names = list(queue_names) if queue_names else known_queue_names(connection)
    declared = declarations.declared()
    here = server or servers.DEFAULT
    names = [n for n in names if (declared[n].server if n in declared else servers.DEFAULT) == here]
    one_pass = _Reconciler(connection, chunk)
    counts = sum((one_pass.queue(name) for name in names), Counter())
    return ReconcileSummary(queues=names, grouped=group_ungrouped(conf.prefix(), chunk), **counts)


class _Reconciler:
    """The steps of one reconcile over one queue, each returning a Counter whose keys are
    ReconcileSummary's fields (``mirrored``, ``errors``, ``retried``, ``held``)."""

    def __init__(self, connection, chunk):
        self.connection, self.chunk, self.prefix = connection, chunk, conf.prefix()

    def queue(self, name):
        failed_ids = self.failed_ids(name)
        if failed_ids is None:
            return Counter()  # its open rows too: whether their jobs are still failed cannot be told
        counts, still_failed = Counter(), set(failed_ids)
        for ids in _chunks(failed_ids, self.chunk):
            mirrored, missing = self.mirror_failed(name, ids)
            counts += mirrored
            still_failed -= missing  # entries whose hash is gone: their open rows are held below
            self.found_again(set(ids) - missing)
        for ids in _chunks(self.open_ids_not_in(name, still_failed), self.chunk):
            counts += self.close_gone(ids)
        return counts

    def failed_ids(self, name):
        """The ids in the queue's failed registry that are UTF-8 (None when it is no sorted set)."""
        key = keys.failed_key(name)
        try:
            raw_ids = self.connection.zrange(key, 0, -1)
        except redis.ResponseError as exc:
            logger.error("reconcile: skipped queue %s: its failed registry %s is not a sorted set (%s)", name, key, exc)
            return None
        ids = [jobread.normal_id(raw) for raw in raw_ids]
        for raw in (i for i in ids if isinstance(i, bytes)):  # a line a minute per registry, with a count
            repeats.report(
                repeats.BAD_ENTRY,
                key,
                "reconcile: skipped entry %s of %s: its job id is not UTF-8",
                jobread.text(raw),
                key,
                log=logger,
                connection=self.connection,
            )
        return [i for i in ids if isinstance(i, str)]

    def mirror_failed(self, name, ids):
        """Mirror the failed jobs ``ids`` that have no open row: (Counter, the ids whose hash is gone)."""

        rows = DeadLetter.objects.filter(prefix=self.prefix, job_id__in=ids)
        seen = dict(rows.values_list("job_id", "times_dead"))
        open_ids = set(rows.filter(status=DeadLetter.Status.OPEN).values_list("job_id", flat=True))
        counts, missing = Counter(), set()
        for job_id, job in zip(ids, jobread.fetch_many(ids, self.connection, check_origin=False, caps=jobread.RUN)):
            if job is None:
                missing.add(job_id)
            elif job_id in open_ids:
                continue
            elif jobread.is_corrupt(job):
                if job_id not in seen:
                    counts.update(self.mirror_corrupt(name, job))
            elif not verified(job):
                counts.update(self.mirror_unverified(name, job_id, job, seen))
            else:
                counts.update(self.mirror_dead(job_id, job, seen))
        return counts, missing

    def mirror_corrupt(self, name, job):
        """Bury a corrupt failed job: ["mirrored"], ["errors"], or [] when it is skipped."""
        if job.kind in ("wrong_type", "no_data"):
            repeats.report(
                repeats.BAD_ENTRY,
                keys.failed_key(name),
                "reconcile: skipped failed job %s of %s: %s (key %s)",
                job.id,
                name,
                job.why,
                jobread.job_key(job.id),
                log=logger,
                connection=self.connection,
            )
            return []
        row = bury_corrupt(self.connection, job.id, name, dict(job.fields), job.why, count=job.count)
        return ["mirrored"] if row is not None else ["errors"]

    def mirror_dead(self, job_id, job, seen):
        """Mirror a failed job unless an operator already dealt with this death (``seen``: job id ->
        deaths its row has seen): ["mirrored"], ["errors"] or []."""
        meta = job.meta
        if not meta.get("dead"):
            # Failed by a path that did not mark it (RQ's own abandoned-job cleanup, a job from
            # before this code): record the death on the job so a later life counts from it.
            meta["dead"] = "abandoned" if "AbandonedJobError" in latest_exc_string(job) else "exhausted"
            meta.setdefault("dead_at", (job.ended_at or now()).isoformat())
            meta["deaths"] = max(int(meta.get("deaths") or 0), seen.get(job_id, 0) + 1 if job_id in seen else 1)
            try:
                job.save_meta()
            except Exception:  # noqa: BLE001
                logger.warning("Could not save dead-letter meta of job %s", job_id)
        if job_id in seen and int(meta.get("deaths") or 1) <= seen[job_id]:
            return []  # the operator already dealt with this death
        try:
            upsert(job, row_values(job))
        except Exception:  # noqa: BLE001
            logger.exception("reconcile: could not mirror dead job %s", job_id)
            return ["errors"]
        return ["mirrored"]

    def mirror_unverified(self, name, job_id, job, seen):
        """Mirror a failed job whose signature does not verify as ``unverified``, nothing of its meta
        believed: ["mirrored"], ["errors"] or []. A row an operator already dealt with is left alone
        (a planted ``deaths`` must not reopen it, nor rewrite what it shows)."""
        if job_id in seen:
            return []
        try:
            raw = self.connection.hgetall(jobread.job_key(job_id))
            upsert(job, unverified_values(name, row_values(job), raw))
        except Exception:  # noqa: BLE001
            logger.exception("reconcile: could not mirror unverified job %s", job_id)
            return ["errors"]
        repeats.report(
            repeats.REFUSED,
            keys.failed_key(name),
            "reconcile: failed job %s of %s carries no valid signature: dead letter %r (retried only "
            "one at a time, from its page)",
            job_id,
            name,
            UNVERIFIED,
            log=logger,
            connection=self.connection,
        )
        return ["mirrored"]

    def open_ids_not_in(self, name, still_failed):
        """Job ids of the queue's open rows whose job is no longer in its failed registry."""

        open_rows = DeadLetter.objects.filter(prefix=self.prefix, queue=name, status=DeadLetter.Status.OPEN)
        return [
            jid
            for jid in open_rows.values_list("job_id", flat=True).iterator(chunk_size=self.chunk)
            if jid not in still_failed
        ]

    def close_gone(self, ids):
        """Open rows whose job left the failed registry -> ``retried`` (the job waits or runs again);
        those whose job is gone from Redis stay open, marked held only in the database (``held``); the
        others (a corrupt job, a job in another state) stay open as they are."""

        jobs = jobread.fetch_many(ids, self.connection, check_origin=False, caps=jobread.RUN)
        retried = [
            jid
            for jid, job in zip(ids, jobs)
            if job is not None and not jobread.is_corrupt(job) and job.get_status(refresh=False) in WAITING_OR_RUNNING
        ]
        gone = [jid for jid, job in zip(ids, jobs) if job is None]
        self.found_again(set(ids) - set(gone))
        counts = Counter()
        rows = DeadLetter.objects.filter(prefix=self.prefix, status=DeadLetter.Status.OPEN)
        if retried:
            counts["retried"] += rows.filter(job_id__in=retried).update(
                status=DeadLetter.Status.RETRIED, updated_at=now()
            )
        if gone:
            counts["held"] += rows.filter(job_id__in=gone, only_in_database_since__isnull=True).update(
                only_in_database_since=now(), updated_at=now()
            )
        return counts

    def found_again(self, ids):
        """The rows of ``ids`` (jobs that are in Redis) no longer marked held only in the database."""
        if ids:
            DeadLetter.objects.filter(prefix=self.prefix, job_id__in=ids, only_in_database_since__isnull=False).update(
                only_in_database_since=None, updated_at=now()
            )


def _chunks(items, size):
    return (items[start : start + size] for start in range(0, len(items), size))


def known_queue_names(connection):
    """Declared queues, queues rq knows of in Redis, and queues of open rows. A queue name in Redis
    that is not UTF-8 (or a registry set of the wrong type) is skipped with an ERROR."""

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
            names.add(key[len(prefix) :])
    names.update(
        DeadLetter.objects.filter(prefix=conf.prefix(), status=DeadLetter.Status.OPEN)
        .values_list("queue", flat=True)
        .distinct()
    )
    return sorted(names)


def group_ungrouped(prefix, chunk):
    """Fingerprint and count the rows written without a fingerprint (the previous release's workers,
    during a deploy); returns how many. One short transaction per row, like ``mirror.upsert``."""

    grouped, failed = 0, set()
    while True:
        pks = list(
            DeadLetter.objects.filter(prefix=prefix, fingerprint="")
            .exclude(pk__in=failed)
            .order_by()
            .values_list("pk", flat=True)[:chunk]
        )
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
                            count_death(row, row.times_dead)
                            grouped += 1
                    break
                except IntegrityError:
                    if attempt:
                        failed.add(pk)
                        logger.exception("reconcile: could not group dead letter %s", pk)


def reconcile_if_due(connection=None, served=()):
    """Run ``reconcile()`` unless another process did within ``RECONCILE_INTERVAL`` seconds (a Redis
    key with that expiry is the lock, on ``connection``'s server). Never raises: called from worker
    maintenance. ``served``: the names of the queues of the worker whose ``connection`` it is: their server's
    queues are the ones reconciled (one server per worker: queues/connection/servers.py)."""

    interval = int(conf.options().get("RECONCILE_INTERVAL", 300))
    if interval <= 0:
        return None
    key = keys.reconcile_key()
    try:
        connection = connection or get_connection()
        if not connection.set(key, now().isoformat(), nx=True, ex=interval):
            return None
        summary = reconcile(connection=connection, server=servers.of_queue(served[0]) if served else None)
    except Exception:  # noqa: BLE001
        logger.exception("Dead-letter reconcile failed; the next maintenance will try again")
        try:
            connection.delete(key)  # e.g. the database is down: let the next maintenance try at once
        except Exception:  # noqa: BLE001
            pass
        return None
    if summary.mirrored or summary.retried or summary.held or summary.errors or summary.grouped:
        logger.info("Dead-letter reconcile: %s, %d grouped", summary, summary.grouped)
    return summary
