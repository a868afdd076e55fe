"""The worker's gate: what a popped job must be before anything of it is imported or run.

Whoever can write to the queues' Redis can push any hash onto a queue. Between the pop and the
start (``Intake.fetch``, worker/intake.py), the job is read as JSON only, and refused — dead-lettered
without running, then the worker goes on to the next job — when:

==============  ======================================================================
reason          the job
==============  ======================================================================
``corrupt``     cannot be read as a JSON job: garbage or missing ``data``, meta or fields
                that are not JSON / not UTF-8, a wrong-typed key, an ``origin`` that is
                no declared queue (one naming another declared queue is dropped, not
                refused: ``elsewhere``), a ``signature`` that is not ASCII, a hash too
                large to run (``entries.too_large``: read before anything is inflated); or
                ``vet`` itself raised on it (``Intake.fetch``). Its raw hash is kept,
                base64-encoded, in the dead letter's ``raw_hash`` (``deadletter.bury_corrupt``).
``not_a_job``   names a function, an instance method or a success/failure/stopped
                callback that is not a declared job (queues/catalog/jobs.py). Nothing is
                imported.
``unsigned``    carries no valid signature of its function, arguments and id
                (queues/jobs/signing.py), unless ``QUEUE_ACCEPT_UNSIGNED_UNTIL`` is still ahead.
==============  ======================================================================

A job whose status is ``canceled`` (``queues.producer.cancel.cancel_job``, or rq's ``Job.cancel``) but
whose id is still in a queue is not refused but dropped, with an INFO: it never runs.

Replay (issue 32): the signature stops forgery, not an id pushed again. A vetted job whose hash says it
must not run again (``replayed``: finished, dead or failed, stopped, or started by a worker that is still
alive) is dropped with one WARNING naming the id and why, never dead-lettered (its hash is the real job's),
unless its pop carried ``jobs.meta.PUT_BACK``, written by the app's own paths that put a job back. A job
``queued``, ``scheduled`` or ``deferred``, or ``started`` by a worker that is gone (the abandoned-job scan's
at-least-once), runs. An entry whose hash belongs to another declared queue (``elsewhere``) is dropped from
this queue's lists and never buried: the job lives in its own queue.

Everything here is one pure check (``vet``) on an already fetched job (the refusal itself, a dead
letter, is ``queues/failures/refused.py``'s): no round
trip is added for a good job. ``OptimaJob`` refuses undeclared names again at import time, for
any path that would bypass this one.
"""

import logging
from dataclasses import dataclass

from queues import rqcompat
from queues.catalog import jobs as catalog
from queues.catalog.queues import queue_names
from queues.jobs import signing
from queues.keyspace import repeats

logger = logging.getLogger("queues.worker")

CORRUPT = "corrupt"  # the dead letter's reason (queues/failures/corrupt.py: CORRUPT)
NOT_A_JOB = "not_a_job"
UNSIGNED = "unsigned"
CANCELED = "canceled"  # not a refusal of the job: it is dropped with an INFO (failures/refused.py)
RUNS = frozenset({"queued", "scheduled", "deferred"})  # statuses a popped job runs in (``replayed``)


@dataclass(frozen=True)
class Refusal:
    reason: str
    why: str


def vet(job, queue_name):
    """None when ``job`` (an OptimaJob fetched from Redis, popped from ``queue_name``) may run;
    else the ``Refusal``. Imports nothing that the job names."""
    try:
        func_name, instance, args, kwargs = job.func_name, job.instance, job.args, job.kwargs
    except Exception as exc:  # noqa: BLE001 — whatever the bytes were
        return Refusal(CORRUPT, f"has data that is not a JSON job ({type(exc).__name__})")
    if not isinstance(func_name, str) or not isinstance(args, (list, tuple)) or not isinstance(kwargs, dict):
        return Refusal(CORRUPT, "has data that is not [function, instance, args, kwargs]")
    if not isinstance(job.meta, dict) or rqcompat.unreadable_meta(job) is not None:
        return Refusal(CORRUPT, "has a meta that is not a JSON object")  # rq keeps such bytes aside
    if job.origin != queue_name:
        return Refusal(CORRUPT, f"names origin {job.origin!r} but was popped from queue {queue_name!r}")
    if not str(getattr(job, "signature", "") or "").isascii():
        return Refusal(CORRUPT, "has a signature field that is not ASCII (a signature is 64 hex digits)")
    if instance is not None:
        return Refusal(NOT_A_JOB, f"names a method {func_name!r} of an instance; only declared functions run")
    if not catalog.is_declared(func_name):
        return Refusal(NOT_A_JOB, f"names {catalog.why_not(func_name)}")
    for what, name in zip(("success", "failure", "stopped"), signing.callbacks_of(job)):
        if name and not catalog.is_declared(name):
            return Refusal(NOT_A_JOB, f"names a {what} callback {catalog.why_not(name)}")
    if not signing.verify(job):
        if not signing.unsigned_accepted():
            return Refusal(
                UNSIGNED,
                "carries no valid signature of its function, arguments and id "
                "(not written by queues.enqueue with this deployment's QUEUE_SIGNING_KEY)",
            )
        logger.warning(
            "Job %s (%s) carries no valid signature; run anyway: QUEUE_ACCEPT_UNSIGNED_UNTIL is %s",
            job.id,
            func_name,
            signing.accept_unsigned_until().isoformat(),
        )
    if job.get_status(refresh=False) == "canceled":  # its id left in a queue (read with the job: no round trip)
        return Refusal(CANCELED, "was canceled")
    return None


def elsewhere(job, queue_name):
    """The declared queue other than ``queue_name`` that ``job``'s hash belongs to (its ``origin``), or None.
    An origin that is no declared queue is not "elsewhere": such a hash is refused ``corrupt`` (``vet``)."""
    origin = getattr(job, "origin", None)
    if not isinstance(origin, str) or not origin or origin == queue_name:
        return None
    return origin if origin in queue_names() else None


def replayed(job, *, put_back=None, is_alive=lambda name: False):
    """Why ``job`` (vetted, popped or due) must not run again, or None when it may. ``put_back``: the
    ``jobs.meta.PUT_BACK`` its pop carried (one of the app's own paths put it back: it runs). ``is_alive(name)``:
    whether the worker ``name`` is alive (called only for a ``started`` job)."""
    if put_back:
        return None
    status = job.get_status(refresh=False)
    status = getattr(status, "value", status)
    if not status or status in RUNS:
        return None
    if status == "started":
        worker = getattr(job, "worker_name", None)
        if worker and is_alive(worker):
            return f"was already started by worker {worker}, which is alive"
        return None  # its worker is gone: at least once, it runs again
    if status == "finished":
        return "is finished"
    if status in ("failed", "stopped"):
        meta = job.meta if isinstance(job.meta, dict) else {}
        dead = meta.get("dead")
        return f"is {status}" + (f" and dead-lettered ({dead})" if isinstance(dead, str) and dead else "")
    if status == "canceled":
        return "was canceled"
    return None


# A drop of a replayed or foreign id is named one by one up to this many a minute per process; past it (a flood
# of pushed ids), one line a minute sums the rest up (keyspace/repeats.py). All are counted in /metrics.
DROPPED_NAMED_PER_MINUTE = 100


def report_dropped(job_id, why):
    """The one line of a popped or due job dropped without running because of what its hash says
    (``elsewhere``, ``replayed``): a WARNING naming the id and why, the first ``DROPPED_NAMED_PER_MINUTE`` of a
    minute; the rest summed up once a minute (``repeats``, kind ``dropped``). Every such drop is reported here."""
    repeats.report(
        repeats.DROPPED,
        "replayed or foreign job ids",
        "Job %s dropped, not run: %s",
        job_id,
        why,
        log=logger,
        level=logging.WARNING,
        burst=DROPPED_NAMED_PER_MINUTE,
    )
