"""What an operator can do to dead letters and jobs; each function acts on one object.

Retry of a dead letter:
  - its job is still in the queue's failed registry -> requeue that very job (same id, so if it
    dies again the lifecycle mirror reopens this row and counts ``times_dead``); the worker gives
    a requeued dead job a full set of attempts again (``queues.retry``);
  - otherwise (discarded, deleted from the panel, expired) -> enqueue a new job from the stored
    ``func_path``/``args``/``kwargs`` through ``queues.enqueue_call``, with ``meta.retry_of`` set to the
    old id, and link the row to it (``retried_as``).
Discard: remove the job from the failed registry and delete it from Redis; the row stays, marked
``discarded`` (it remains searchable and can still be retried from its stored arguments).

Callers (the admin actions, the panel) write one audit row per object with the outcome returned.
"""
import json
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.registry import (
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
)

from .. import conf, jobmeta
from ..connection import get_connection
from ..exceptions import QueuesError
from ..registry import OptimaJob, get_queue, queue_names


@dataclass(frozen=True)
class Outcome:
    outcome: str  # "ok", "error" or "skipped"
    detail: str
    job_id: str = ""  # the job that now runs, when one does


def _failed_registry(queue):
    return FailedJobRegistry(queue=queue, job_class=OptimaJob)


def retry_dead_letter(row_id):
    """Retry the DeadLetter ``row_id`` (see the module docstring). Returns an Outcome."""
    from ..models import DeadLetter

    with transaction.atomic():
        row = DeadLetter.objects.select_for_update().get(pk=row_id)
        if row.status == DeadLetter.Status.RETRIED:
            return Outcome("skipped", f"already retried as {row.retried_as or row.job_id}; nothing done")
        try:
            queue = get_queue(row.queue)
            registry = _failed_registry(queue)
            if row.job_id in registry:
                registry.requeue(row.job_id)
                new_id, detail = row.job_id, "requeued the failed job in place"
            else:
                from ..enqueueing import enqueue_call

                job = enqueue_call(row.queue, row.func_path, args=list(row.args or []), kwargs=dict(row.kwargs or {}),
                                   meta={jobmeta.RETRY_OF: row.job_id})
                new_id, detail = job.id, f"job no longer in the failed registry: enqueued new job {job.id}"
        except (QueuesError, NoSuchJobError, InvalidJobOperation) as exc:
            return Outcome("error", f"{type(exc).__name__}: {exc}")
        row.status = DeadLetter.Status.RETRIED
        row.retried_as = new_id
        row.save(update_fields=["status", "retried_as", "updated_at"])
    return Outcome("ok", detail, new_id)


def discard_dead_letter(row_id):
    """Discard the DeadLetter ``row_id``: out of the failed registry, job deleted, row kept."""
    from ..models import DeadLetter

    with transaction.atomic():
        row = DeadLetter.objects.select_for_update().get(pk=row_id)
        if row.status != DeadLetter.Status.OPEN:
            return Outcome("skipped", f"status is {row.status}; only open dead letters are discarded")
        # No declared queue needed: a queue removed from the settings still has its registry in Redis.
        connection = get_connection()
        removed = FailedJobRegistry(row.queue, connection=connection, job_class=OptimaJob).remove(row.job_id)
        deleted = delete_job_hash(row.job_id, connection)
        detail = ("removed from the failed registry" if removed else "was not in the failed registry") + (
            ", job deleted" if deleted else ", job hash already gone")
        row.status = DeadLetter.Status.DISCARDED
        row.save(update_fields=["status", "updated_at"])
    return Outcome("ok", detail)


def delete_job_hash(job_id, connection=None):
    """Delete a job and what rq keeps with it; False when it was already gone."""
    connection = connection or get_connection()
    try:
        job = OptimaJob.fetch(job_id, connection=connection)
    except NoSuchJobError:
        return False
    job.delete()
    return True


def mark_dead_letters(job_ids, status, retried_as_self=False):
    """Rows of ``job_ids`` still open -> ``status`` (after the panel requeued or deleted the jobs)."""
    from ..models import DeadLetter

    job_ids = list(job_ids)
    if not job_ids:
        return 0
    updates = {"status": status, "updated_at": timezone.now()}
    total = 0
    for start in range(0, len(job_ids), 500):
        chunk = job_ids[start:start + 500]
        rows = DeadLetter.objects.filter(prefix=conf.prefix(), job_id__in=chunk, status=DeadLetter.Status.OPEN)
        if retried_as_self:
            from django.db.models import F

            total += rows.update(retried_as=F("job_id"), **updates)
        else:
            total += rows.update(**updates)
    return total


# --- finding a job -------------------------------------------------------------------------------

_REGISTRIES = (
    ("failed", FailedJobRegistry),
    ("finished", FinishedJobRegistry),
    ("scheduled", ScheduledJobRegistry),
    ("deferred", DeferredJobRegistry),
    ("canceled", CanceledJobRegistry),
)


def find_job(job_id, connection=None):
    """Where ``job_id`` is, across every declared queue and registry, in two round trips.

    Returns {"job_id", "exists", "origin", "status", "description", "locations": [(queue, place)]}.
    """
    connection = connection or get_connection()
    names = queue_names()
    job_key = OptimaJob.key_for(job_id)
    with connection.pipeline(transaction=False) as pipe:
        pipe.hmget(job_key, "origin", "status", "description", "enqueued_at", "ended_at", "meta")
        for name in names:
            queue = get_queue(name, connection=connection)
            pipe.lpos(queue.key, job_id)
            for _, cls in _REGISTRIES:
                pipe.zscore(cls(name, connection=connection).key, job_id)
        replies = pipe.execute()
    fields = [v.decode() if isinstance(v, bytes) else v for v in replies[0]]
    origin, status, description, enqueued_at, ended_at, meta = fields
    locations = []
    i = 1
    for name in names:
        if replies[i] is not None:
            locations.append((name, "queued"))
        i += 1
        for place, _ in _REGISTRIES:
            if replies[i] is not None:
                locations.append((name, place))
            i += 1
    if status == "started" and origin:
        locations.append((origin, "started"))
    return {
        "job_id": job_id,
        "exists": origin is not None or status is not None,
        "origin": origin,
        "status": status,
        "description": description,
        "enqueued_at": enqueued_at,
        "ended_at": ended_at,
        "locations": locations,
        "retry_of": _retry_of(meta),
    }


def _retry_of(raw_meta):
    """The dead job this one was enqueued to retry (``meta.retry_of``), or None."""
    try:
        meta = json.loads(raw_meta) if raw_meta else {}
    except ValueError:
        return None
    value = meta.get(jobmeta.RETRY_OF) if isinstance(meta, dict) else None
    return value if isinstance(value, str) else None
