"""The transactional outbox: a job accepted in a database transaction is never lost.

An enqueue inside ``transaction.atomic()`` (or with ``durable=True``) writes an ``OutboxEntry`` row
in the caller's transaction instead of writing to Redis. After the commit the committing process
claims the row, writes the job to Redis (``writing.write_job``) and deletes the row. Whatever
is left behind (Redis did not answer, the process died between the commit and the write) is
pushed by a relay: every worker runs one every ``OUTBOX_RELAY_SECONDS`` (from its tick, also while
a job runs), and ``manage.py queues_relay`` runs one on demand or in a loop.

Why not a library: django-outbox-style packages publish events to a broker; none writes an rq job,
and the guarantees below hinge on rq's own write (explicit job id, unique keys, limits).

**One job per row, never two.** A row is pushed by whoever holds its claim (``claimed_by``,
``claimed_until``). The committing process inserts its row already claimed for ``PUSH_GRACE``
seconds, so its push after the commit costs no extra statement (past half the grace, a long
transaction, it renews the claim first: one UPDATE that succeeds only while the claim is still
its own). A relay claims rows nobody holds or whose claim ran out (their pusher died, or Redis
refused the push and it let go), for ``OUTBOX_LEASE_SECONDS``. PostgreSQL relays pick their rows
with ``SELECT ... FOR UPDATE SKIP LOCKED`` so that concurrent relays take disjoint rows without
waiting; SQLite has no row locks, and there the claim is a single ``UPDATE ... WHERE id IN (SELECT
... LIMIT n)`` statement, atomic under SQLite's database write lock. Claims compare times of
different machines (the web's insert, a worker's relay): clocks kept by NTP are well within the
grace. A pusher that wrote the job and died before
deleting the row leaves a row whose job already exists: the next push writes with the job's id
as an explicit, must-not-exist id, finds the job, sees it is this very job (same signature and
creation time), and only deletes the row. So a job is written to Redis exactly once, then
delivered at least once like every job (docs/operations.md#the-outbox).
"""

import base64
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, connections, router, transaction
from django.db.models import F, Min, Q
from django.utils import timezone

from queues import conf
from queues.events import hooks
from queues.exceptions import InvalidJob, QueueUnavailable

if TYPE_CHECKING:
    from queues.models import OutboxEntry

logger = logging.getLogger("queues.outbox")  # a documented logger name: kept when the module moved

BATCH = 100  # rows one relay claims at a time
# Seconds the committing process holds its own row from the insert: after a SIGKILL between the
# commit and the push, a relay pushes the row this long after the insert at the latest (plus its
# OUTBOX_RELAY_SECONDS). A push slower than this (a Redis timing out) may meet a relay's push of
# the same row: the second finds the job written and only deletes the row (see _write).
PUSH_GRACE = 10.0
_B64 = "b64"


# -- the row ------------------------------------------------------------------------------------
def encode(mapping):
    """A job's Redis hash (``Job.to_dict()``) as JSON: bytes values become ``{"b64": ...}``."""
    out = {}
    for key, value in mapping.items():
        if isinstance(value, (bytes, bytearray)):
            out[key] = {_B64: base64.b64encode(bytes(value)).decode("ascii")}
        else:
            out[key] = value
    return out


def decode(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored hash back as Redis would return it (bytes values), for ``Job.restore``."""
    out = {}
    for key, value in stored.items():
        if isinstance(value, dict) and _B64 in value:
            out[key] = base64.b64decode(value[_B64])
        else:
            out[key] = str(value).encode()
    return out


def _model():
    from queues.models import OutboxEntry  # the models need Django's apps ready; importing this module must not

    return OutboxEntry


def _using():
    return router.db_for_write(_model())


def stage(queue, job, when, *, explicit_id, lock_key):
    """Accept ``job`` (built and signed) through the outbox: a row now, in the caller's transaction
    if there is one; the push to Redis after the commit (at once outside a transaction)."""
    using = _using()
    token = uuid.uuid4().hex
    staged = time.monotonic()
    now = timezone.now()
    entry = (
        _model()
        .objects.using(using)
        .create(
            prefix=conf.prefix(),
            queue=queue.name,
            job_id=job.id,
            job=encode(job.to_dict()),
            due_at=when,
            explicit_id=explicit_id,
            unique_key=lock_key or "",
            created_at=now,
            claimed_by=token,
            claimed_until=now + timezone.timedelta(seconds=PUSH_GRACE),
        )
    )
    push = _Push(entry.pk, token, staged, queue, job, when, lock_key)
    if connections[using].in_atomic_block:
        # robust: a failing push must neither break the caller's other on-commit callbacks nor
        # undo what is committed; the row stays for the relay.
        transaction.on_commit(push.after_commit, using=using, robust=True)
    else:
        push.after_commit()


class _Push:
    """The committing process's push of its own row (it still holds the job object: no decode)."""

    __slots__ = ("pk", "token", "staged", "queue", "job", "when", "lock_key")

    def __init__(self, pk, token, staged, queue, job, when, lock_key):
        self.pk, self.token, self.staged = pk, token, staged
        self.queue, self.job, self.when, self.lock_key = queue, job, when, lock_key

    def after_commit(self):
        if time.monotonic() - self.staged > PUSH_GRACE / 2:
            # A long transaction: renew the claim, unless a relay took the row meanwhile.
            try:
                mine = (
                    _model()
                    .objects.using(_using())
                    .filter(pk=self.pk, claimed_by=self.token)
                    .update(claimed_until=timezone.now() + _lease())
                )
            except DatabaseError as exc:  # the row is committed: a relay pushes it
                logger.warning(
                    "outbox: could not claim job %s after the commit (%s); a relay will push it",
                    self.job.id,
                    type(exc).__name__,
                )
                return
            if not mine:
                return
        _push_claimed(self.pk, self.queue, self.job, self.when, self.lock_key)


def _lease():
    return timezone.timedelta(seconds=float(conf.options()["OUTBOX_LEASE_SECONDS"]))


def _push_claimed(pk, queue, job, when, lock_key):
    """Write a claimed row's job to Redis and delete the row; True when the row is done with.
    A Redis failure releases the claim (the next relay tries again) and returns False."""
    from queues.producer.write import write_job  # no cycle: to the top once issue 32's edits here are merged

    rows = _model().objects.using(_using()).filter(pk=pk)
    try:
        duplicate_of = _write(write_job, queue, job, when, lock_key)
    except QueueUnavailable as exc:
        rows.update(claimed_until=None, claimed_by="", push_attempts=F("push_attempts") + 1, last_error=str(exc)[:2000])
        logger.warning("outbox: job %s stays in the outbox, Redis did not take it: %s", job.id, exc)
        return False
    except InvalidJob as exc:
        # Another job of this explicit id is in Redis: this one can never be written. The caller
        # was told it was accepted, so say it loudly; the row goes (nothing could ever push it).
        logger.error("outbox: job %s (queue %s) dropped: %s", job.id, queue.name, exc)
        rows.delete()
        never_written(job)
        return True
    if duplicate_of is not None:
        logger.info("outbox: job %s not written, unique job %s is still waiting", job.id, duplicate_of)
        never_written(job)
    rows.delete()
    return True


def never_written(job):
    """``job`` was accepted (an enqueue returned it) but is never written: the duplicate of a unique key's job
    still waiting at the commit, or of an explicit id. It never runs, as a job canceled before it started: the
    hooks hear of it so (``after_cancel``), e.g. the batch it was to join stops waiting for it."""
    hooks.after_cancel(job.id, job.meta if isinstance(job.meta, dict) else {})


def _write(write_job, queue, job, when, lock_key):
    """``write_job`` with the job's id as must-not-exist (generated ids too); a job already there
    that is this very job (a pusher wrote it and died before deleting the row) counts as written."""
    try:
        return write_job(queue, job, when, explicit_id=True, lock_key=lock_key)
    except InvalidJob:
        if _already_written(queue, job):
            # An earlier push wrote it; with REDIS_WAIT_REPLICAS it may have raised NotReplicated:
            # the row goes only once the replicas have the job too (raises NotReplicated meanwhile).
            _confirm_replicated(queue)
            logger.info("outbox: job %s was already in Redis (an earlier push); row removed", job.id)
            return None
        raise


def _confirm_replicated(queue):
    import redis  # no cycle: to the top once issue 32's edits here are merged

    from queues.connection import replication  # no cycle: to the top once issue 32's edits here are merged
    from queues.connection.clients import unavailable

    try:
        replication.confirm(queue)
    except redis.RedisError as exc:
        raise unavailable(exc, connection=queue.connection) from exc


def _already_written(queue, job):
    import redis  # no cycle: to the top once issue 32's edits here are merged

    from queues.connection.clients import unavailable  # no cycle: to the top once issue 32's edits here are merged

    try:
        signature, created_at = queue.connection.hmget(job.key, "signature", "created_at")
    except redis.RedisError as exc:
        raise unavailable(exc, connection=queue.connection) from exc
    mine = job.to_dict()
    return (signature or b"").decode(errors="replace") == str(mine.get("signature", "")) and (created_at or b"").decode(
        errors="replace"
    ) == str(mine["created_at"])


# -- the relay -----------------------------------------------------------------------------------
def relay(batch=BATCH):
    """Push up to ``batch`` rows left in the outbox, oldest first; -> (pushed, left). A Redis server that
    fails a push is not tried again in this relay: its rows are released for the next one, and the rows of
    the queues on other servers (QUEUES_REDIS_SERVERS) are still pushed: a server down stops only its own."""
    from queues.catalog.lookup import get_config  # no cycle: to the top once issue 32's edits here are merged
    from queues.producer.write import declared_queue

    Entry = _model()
    using = _using()
    token = uuid.uuid4().hex
    ids = _claim(Entry, using, token, batch)
    rows = list(Entry.objects.using(using).filter(id__in=ids, claimed_by=token).order_by("id")) if ids else []
    pushed, down = 0, set()  # down: the servers that failed a push in this relay
    for entry in rows:
        pk = entry.pk
        try:
            config = get_config(entry.queue)
            if config.server in down:
                Entry.objects.using(using).filter(pk=pk).update(claimed_until=None, claimed_by="")
                continue
            queue = declared_queue(entry.queue, config)
        except Exception as exc:  # noqa: BLE001 — an undeclared queue (a deploy removed it)
            Entry.objects.using(using).filter(pk=pk).update(
                claimed_until=None,
                claimed_by="",
                push_attempts=F("push_attempts") + 1,
                last_error=f"{type(exc).__name__}: {exc}"[:2000],
            )
            logger.error("outbox: job %s waits for queue %r, which is not declared: %s", entry.job_id, entry.queue, exc)
            continue
        job = queue.job_class(entry.job_id, connection=queue.connection, serializer=queue.serializer)
        job.restore(decode(entry.job))
        if not _push_claimed(pk, queue, job, entry.due_at, entry.unique_key or None):
            down.add(config.server)  # its claim released by _push_claimed
            continue
        pushed += 1
    return pushed, len(ids) - pushed


def relay_all():
    """``relay`` batch after batch until the outbox is empty or Redis refuses; -> (pushed, left)."""
    pushed = 0
    while True:
        done, left = relay()
        pushed += done
        if left or done < BATCH:
            return pushed, left


def _claim(Entry, using, token, batch):
    """Claim up to ``batch`` rows of this prefix nobody holds (or whose claim ran out); -> their ids."""
    now = timezone.now()
    claimable = Entry.objects.using(using).filter(_unclaimed(now), prefix=conf.prefix()).order_by("id")
    if not claimable.exists():  # the usual case: a read, no write lock taken (SQLite) every relay tick
        return []
    claim = {"claimed_until": now + _lease(), "claimed_by": token}
    if connections[using].features.has_select_for_update_skip_locked:
        with transaction.atomic(using=using):
            ids = list(claimable.select_for_update(skip_locked=True).values_list("id", flat=True)[:batch])
            if ids:
                Entry.objects.using(using).filter(id__in=ids).update(**claim)
        return ids
    # One statement: atomic under SQLite's write lock, so two relays never claim the same row.
    Entry.objects.using(using).filter(id__in=claimable.values("id")[:batch]).update(**claim)
    return list(Entry.objects.using(using).filter(claimed_by=token).order_by("id").values_list("id", flat=True))


def _unclaimed(now):
    """Rows nobody holds: never claimed, released, or their claim ran out by ``now``."""
    return Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)


def stats():
    """-> {queue: (rows, oldest created_at)} of this prefix's outbox (one grouped query)."""
    from django.db.models import Count  # no cycle: to the top once issue 32's edits here are merged

    rows = (
        _model()
        .objects.using(_using())
        .filter(prefix=conf.prefix())
        .values_list("queue")
        .annotate(n=Count("id"), oldest=Min("created_at"))
        .order_by()
    )
    return {queue: (n, oldest) for queue, n, oldest in rows}


def waiting(job_id: str) -> "OutboxEntry | None":
    """The outbox row of ``job_id`` (this prefix), or None."""
    return _model().objects.using(_using()).filter(prefix=conf.prefix(), job_id=job_id).first()


def cancel(job_id):
    """Delete ``job_id``'s row unless a pusher holds it; -> True when deleted."""
    deleted, _ = (
        _model()
        .objects.using(_using())
        .filter(_unclaimed(timezone.now()), prefix=conf.prefix(), job_id=job_id)
        .delete()
    )
    return bool(deleted)


def stored_meta(entry: "OutboxEntry") -> dict[str, Any]:
    """The job's meta from an outbox row (the owner, the queue), {} when unreadable."""
    import json  # no cycle: to the top once issue 32's edits here are merged

    raw = decode(entry.job).get("meta")
    try:
        meta = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return meta if isinstance(meta, dict) else {}


# -- in the worker -------------------------------------------------------------------------------
class _Schedule:
    next_at = 0.0
    failing_since = None


_schedule = _Schedule()


def relay_if_due():
    """The worker's relay: from its tick (every couple of seconds), at most every
    ``OUTBOX_RELAY_SECONDS``. Never raises: a database or Redis being down is logged (once a
    minute at most) and tried again at the next tick that is due."""
    interval = float(conf.options()["OUTBOX_RELAY_SECONDS"])
    if interval <= 0:
        return
    moment = time.monotonic()
    if moment < _schedule.next_at:
        return
    _schedule.next_at = moment + interval
    try:
        relay_all()
    except Exception as exc:  # noqa: BLE001 — the relay never ends or stalls a worker
        if _schedule.failing_since is None or moment - _schedule.failing_since >= 60:
            _schedule.failing_since = moment
            logger.warning("outbox relay failed (%s: %s); next try in %s s", type(exc).__name__, exc, interval)
        return
    _schedule.failing_since = None
