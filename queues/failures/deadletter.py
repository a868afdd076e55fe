"""Dead letters: jobs that will not be retried, kept in Redis and mirrored into the database.

Lifecycle (docs/lifecycle.md): attempt -> backoff -> ... -> dead. A dead job

- stays in RQ's FailedJobRegistry ``<prefix>:failed:<queue>`` with no expiry (the queue's
  ``failure_ttl``, -1 by default), its hash ``<prefix>:job:<id>`` and its results stream
  ``<prefix>:results:<id>`` (every attempt's traceback) kept with it;
- is mirrored into one ``queues.DeadLetter`` row per (prefix, job id), for investigation in the admin;
- is then retried (requeued: same job id, a fresh set of attempts) or discarded by an operator
  (``queues/failures/operations.py``).

This module marks and buries a dead job (``mark_dead``, ``keep_forever``, ``bury``); the rest of the
dead letter's life is in modules of its own, their names re-exported here:

- ``mirror``: the row (``row_values``, ``mirror``). The mirror is idempotent: ``job.meta["deaths"]``
  counts the job's deaths, the row's ``times_dead`` the deaths it has seen. The same death mirrored
  twice updates the row in place; a job that an operator retried and that died again reopens its
  row (``status = open``, ``times_dead + 1``). Each row carries the ``fingerprint`` of its failure
  (``queues/failures/fingerprint.py``) and counts, in the same transaction, in its ``FailureGroup``
  (deaths seen, first and last seen, queues, latest example): ``mirror.count_death``.
- ``corrupt``: a job whose hash cannot be read as a job (``bury_corrupt``, the raw hash kept).
- ``unverified``: a failed-registry job whose signature does not verify, mirrored by ``reconcile``
  with nothing of its meta believed; like the gate's ``unsigned``, never retried but one row at a time.
- ``reconcile``: the database may be down when a job dies: the mirror logs and carries on, never
  failing the worker. ``reconcile()`` (``manage.py queues_reconcile``, and every worker's maintenance
  at most every ``RECONCILE_INTERVAL`` seconds) brings the table back in line with Redis: failed-registry
  jobs missing from the table are mirrored; open rows whose job left the failed registry some other
  way are marked ``retried`` (requeued, e.g. from django-rq's dashboard); those whose job is gone from Redis
  stay open, marked held only in the database (``only_in_database_since``): only an operator discards;
  rows written without a fingerprint (by the previous release during a deploy) are grouped.
"""

from rq.job import JobStatus
from rq.registry import FailedJobRegistry
from rq.results import Result

from queues.events import hooks
from queues.failures.corrupt import CORRUPT, bury_corrupt, decode_raw_hash, encode_raw_hash  # noqa: F401
from queues.failures.mirror import carried, carried_of, mirror, now, row_values  # noqa: F401
from queues.failures.reconcile import ReconcileSummary, reconcile, reconcile_if_due  # noqa: F401
from queues.failures.retry import exc_summary
from queues.failures.unverified import UNVERIFIED  # noqa: F401
from queues.jobs import meta as jobmeta
from queues.jobs import stream


def mark_dead(job, reason, *, exc_type="", exc_message="", worker_name=""):
    """Record a death in ``job.meta`` (not saved: the caller saves it with its other writes)."""
    jobmeta.mark_dead(
        job.meta,
        reason,
        attempt=jobmeta.current_attempt(job),
        exc_type=exc_type,
        exc_message=exc_message,
        worker_name=worker_name,
        now=now(),
    )


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
    registry or the queue. The hooks' ``dead_into`` rides on the burial's MULTI (a batch member's death is
    counted with it: a process killed just after the burial loses no count); then the hooks' ``after_dead``
    (the outcome line, ``job_dead``). Returns
    the DeadLetter row (None if the database could not be written; ``reconcile`` catches up)."""

    job.get_meta(refresh=True)
    registry = FailedJobRegistry(job.origin, connection=job.connection, job_class=type(job), serializer=job.serializer)
    already = job.meta.get("dead") and job.id in registry
    if not already:
        exc_type, exc_message = exc_summary(None, exc_string)
        mark_dead(job, reason, exc_type=exc_type, exc_message=exc_message, worker_name=worker_name)
        ttl = job.failure_ttl if job.failure_ttl is not None else -1
        job.ended_at = job.ended_at or now()
        with job.connection.pipeline() as pipeline:
            job.set_status(JobStatus.FAILED, pipeline=pipeline)
            job.save(pipeline=pipeline)  # meta included
            registry.add(job, ttl=ttl, exc_string=exc_string, pipeline=pipeline)
            stream.record(
                job,
                Result.Type.FAILED,
                ttl,
                pipeline,
                attempt=jobmeta.current_attempt(job),
                exc_string=exc_string,
                worker_name=worker_name,
            )
            keep_forever(job, pipeline)
            hooks.dead_into(job, pipeline)  # what lands with the death itself: a batch member's count
            pipeline.execute()
        hooks.after_dead(job, jobmeta.queue_name(job), reason=reason, duration=0.0, exc_string=exc_string)
    return mirror(job, exc_string=exc_string)
