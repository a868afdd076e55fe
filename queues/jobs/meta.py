"""Every key this project keeps in an rq job's ``meta``, with its one writer and its readers.

``job.meta`` is a JSON object in the job hash; rq leaves it to us. Other releases of this project
read and write the same keys (a rolling deploy runs two at once), so a key is never renamed or
given another meaning: add a new one instead. Leaf module: no import from this project.

==================== ============================== =========================================
key                  written by                     meaning
==================== ============================== =========================================
queue                ``for_enqueue``                declared queue name (rq's origin may differ)
attempts_allowed     ``for_enqueue``                runs in all, per-enqueue override
attempt              ``for_enqueue``, ``next_attempt``, ``new_life``   1-based attempt now due
first_failed_at      ``next_attempt``, ``mark_dead``  ISO time of the first failure of this life
last_failed_at       ``next_attempt``               ISO time of the latest failure
last_retry_reason    ``next_attempt``               backoff, retry_after, abandoned
dead                 ``mark_dead`` (reason)         set while the job is a dead letter
dead_at              ``mark_dead``                  ISO time of the death
deaths               ``mark_dead``                  deaths so far (the mirror's idempotency)
attempts_made        ``mark_dead``                  attempts used in the life that ended
exc_type             ``mark_dead``                  dotted class of the last error
exc_message          ``mark_dead``                  its message (2,000 chars at most)
dead_worker          ``mark_dead``                  worker that ran the last attempt
interruptions        ``mark_interrupted``           returns to the queue that cost no attempt
last_interruption    ``mark_interrupted``           why the latest one happened
retry_of             admin retry (board)            dead job this one retries
schedule             periodic run (schedules)       schedule id of a periodic run
scheduled_for        periodic run (schedules)       ISO time of the tick it runs for
progress             ``set_progress`` (job code)    {"percent", "step", "steps"} (``queues.current_job()``)
owner                ``for_owner`` (features.api)   who asked, for ``/jobs/<id>/`` (user id or "anonymous")
priority             ``for_enqueue``                ``priority=`` of the enqueue, an int; absent when 0
task                 queues/tasks/backend.py        a Task's backend alias, priority, run_after (ISO)
worker_ids           queues/tasks/run.py            a Task's workers, one per counted attempt
first_enqueued_at    ``stamp_enqueued`` (once)      unix seconds of the first enqueue (kept by retries)
due_at               ``stamp_enqueued``, ``set_due``   unix seconds a delayed job / retry became due
cursor               ``set_cursor`` (job code)      the last checkpoint of a long job (any JSON; issue 34)
max_run_seconds      ``for_enqueue``                a long job pauses at a checkpoint past this (issue 34)
==================== ============================== =========================================

``first_enqueued_at`` and ``due_at`` exist for the wait and total histograms (queues/metrics/recorder.py):
rq rewrites ``enqueued_at`` on every push (a retry, the scheduler's move of a due job), so the first
enqueue is stamped once here; ``due_at`` is cleared when the job goes back without a delay.

``priority`` decides the job's *band* (``band``): every push of the job — the enqueue, a retry, the
scheduler's move of a delayed job, a give-back, the panel's requeue — goes to that band of its queue
(``queues.keyspace.keys.band_key``), and workers pop high before normal before low (worker/dequeue.py).

A periodic job's *template* (the rq-scheduler entry ``queues.periodic.schedules.register`` writes; never run
itself) carries ``optima_schedule`` (schedule id), ``digest``, ``queue``, ``cron``, ``interval``,
``attempts`` and ``timeout``: ``for_template`` writes them, for the panel and ``register``'s digest; a
run is built from the declared schedule, never from them (``schedules.scheduler_class``).
"""

import datetime as dt
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rq.job import Job

QUEUE = "queue"
ATTEMPTS_ALLOWED = "attempts_allowed"
ATTEMPT = "attempt"
FIRST_FAILED_AT = "first_failed_at"
LAST_FAILED_AT = "last_failed_at"
LAST_RETRY_REASON = "last_retry_reason"
DEAD = "dead"
DEAD_AT = "dead_at"
DEATHS = "deaths"
ATTEMPTS_MADE = "attempts_made"
EXC_TYPE = "exc_type"
EXC_MESSAGE = "exc_message"
DEAD_WORKER = "dead_worker"
INTERRUPTIONS = "interruptions"
LAST_INTERRUPTION = "last_interruption"
RETRY_OF = "retry_of"
SCHEDULE = "schedule"
SCHEDULED_FOR = "scheduled_for"
PROGRESS = "progress"
OWNER = "owner"
PRIORITY = "priority"
TASK = "task"  # {"backend": alias, "priority": n (when not 0), "run_after": ISO (when given)}
WORKER_IDS = "worker_ids"
FIRST_ENQUEUED_AT = "first_enqueued_at"
DUE_AT = "due_at"
CURSOR = "cursor"  # issue 34: ``queues.current_job().checkpoint(cursor)`` (queues/jobs/resume.py)
MAX_RUN_SECONDS = "max_run_seconds"  # issue 34: the enqueue option, when given
TEMPLATE_SCHEDULE = "optima_schedule"
TEMPLATE_DIGEST = "digest"

# The keys the app writes itself, refused in the ``meta=`` of the public enqueue API
# (``queues.producer.api.check_meta_keys``): a caller's ``task`` would make a plain job look like a
# Task, its ``attempt`` or ``dead`` would be read as the app's. ``owner`` is the one key a caller
# sets (``for_owner``). A key added to the table above that only the app writes belongs here too.
APP_OWNED = frozenset(
    {
        QUEUE,
        ATTEMPTS_ALLOWED,
        ATTEMPT,
        FIRST_FAILED_AT,
        LAST_FAILED_AT,
        LAST_RETRY_REASON,
        DEAD,
        DEAD_AT,
        DEATHS,
        ATTEMPTS_MADE,
        EXC_TYPE,
        EXC_MESSAGE,
        DEAD_WORKER,
        INTERRUPTIONS,
        LAST_INTERRUPTION,
        RETRY_OF,
        SCHEDULE,
        SCHEDULED_FOR,
        PROGRESS,
        PRIORITY,
        TASK,
        WORKER_IDS,
        FIRST_ENQUEUED_AT,
        DUE_AT,
        TEMPLATE_SCHEDULE,
        TEMPLATE_DIGEST,
        CURSOR,
        MAX_RUN_SECONDS,
    }
)


def _iso(when):
    return when.astimezone(dt.UTC).isoformat()


def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a meta that says inf (JSON's 1e999)
        return default


# -- readers -------------------------------------------------------------------------------
def queue_name(job: "Job") -> str:
    """The declared queue name of a job (written at enqueue; rq's origin otherwise)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    return meta.get(QUEUE) or job.origin


def current_attempt(job: "Job") -> int:
    """The 1-based attempt the job is on (1 when the meta says nothing usable)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    return max(1, _int(meta.get(ATTEMPT, 1), 1))


def attempts_allowed(job: "Job") -> int | None:
    """The per-enqueue ``attempts``, or None."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    return meta.get(ATTEMPTS_ALLOWED)


def _seconds(value):
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def first_enqueued(job):
    """Unix seconds of the job's first enqueue (``created_at`` for a job written without the stamp)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    stamp = _seconds(meta.get(FIRST_ENQUEUED_AT))
    if stamp is None and getattr(job, "created_at", None) is not None:
        stamp = job.created_at.replace(tzinfo=job.created_at.tzinfo or dt.UTC).timestamp()
    return stamp


def ready_since(job):
    """Unix seconds since which the job could start: when it became due (a delayed job or a retry), else
    when it was (last) pushed to its queue; None when unknown."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    due = _seconds(meta.get(DUE_AT))
    enqueued = (
        job.enqueued_at.replace(tzinfo=job.enqueued_at.tzinfo or dt.UTC).timestamp()
        if getattr(job, "enqueued_at", None) is not None
        else None
    )
    if due is not None and (enqueued is None or due <= enqueued):
        return due
    return enqueued


# The bands of a queue, in pop order: priority > 0, = 0 and < 0.
HIGH, NORMAL, LOW = "high", "normal", "low"
BANDS = (HIGH, NORMAL, LOW)


def band_of(priority):
    """The band of a ``priority`` (an int; anything else, e.g. a meta planted by hand, is normal)."""
    if not isinstance(priority, int) or isinstance(priority, bool) or priority == 0:
        return NORMAL
    return HIGH if priority > 0 else LOW


def progress(meta: object) -> Any:
    """The progress a running job reported (``set_progress``: ``{"percent", "step", "steps"}``), or None.
    Jobs of older releases wrote any JSON here: it is returned as it is."""
    return meta.get(PROGRESS) if isinstance(meta, dict) else None


def owner(meta):
    """Who enqueued the job (``for_owner``): a user id or "anonymous"; None for a job without one."""
    return meta.get(OWNER) if isinstance(meta, dict) else None


def priority(job):
    """The ``priority=`` the job was enqueued with (0 when the meta says nothing usable)."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    value = meta.get(PRIORITY, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def band(job):
    """The band the job is pushed to: ``HIGH``, ``NORMAL`` or ``LOW``."""
    return band_of(priority(job))


# -- writers (they change ``meta`` in place; the caller saves it with its other writes) ------
def for_enqueue(extra, *, queue, attempts, priority=0, max_run_seconds=None):
    """The meta of a job being enqueued: the caller's ``extra`` plus this project's keys."""
    meta = {QUEUE: queue, ATTEMPTS_ALLOWED: attempts, ATTEMPT: 1}
    meta = {**extra, **meta} if extra else meta
    if priority:
        meta[PRIORITY] = priority
    else:
        meta.pop(PRIORITY, None)  # the band is the ``priority=`` option's, never a caller's meta key
    if max_run_seconds is not None:
        meta[MAX_RUN_SECONDS] = max_run_seconds
    return meta


def stamp_enqueued(meta, at, due=None):
    """An enqueue at ``at`` (unix seconds), due at ``due`` (None: now): the first enqueue is kept."""
    meta.setdefault(FIRST_ENQUEUED_AT, round(at, 3))
    set_due(meta, due)


def set_due(meta, due):
    """The job becomes due at ``due`` (unix seconds), or at its next push when None."""
    if due is None:
        meta.pop(DUE_AT, None)
    else:
        meta[DUE_AT] = round(due, 3)


def set_progress(meta, done, total):
    """A running job did ``done`` of ``total`` steps: ``{"percent": 0-100, "step": done, "steps": total}``,
    the shape the panel draws (templates/queues/_progress.html) and ``job_state`` returns."""
    for name, value in (("done", done), ("total", total)):
        if (
            not isinstance(value, (int, float))
            or isinstance(value, bool)
            or value != value
            or abs(value) == float("inf")
        ):
            raise ValueError(f"set_progress({name}=...) must be a finite number, got {value!r}.")
    if total <= 0 or done < 0:
        raise ValueError(
            f"set_progress(done, total) needs 0 <= done and total > 0, got done={done!r}, total={total!r}."
        )
    meta[PROGRESS] = {"percent": round(100 * done / total), "step": done, "steps": total}


def cursor(meta):
    """The last checkpoint of a long job (``set_cursor``), or None before the first."""
    return meta.get(CURSOR) if isinstance(meta, dict) else None


def set_cursor(meta, value):
    """A long job's checkpoint: ``value`` (already checked to be JSON: queues/jobs/resume.py)."""
    meta[CURSOR] = value


def max_run_seconds(meta):
    """The job's ``max_run_seconds`` option (a positive number), or None."""
    value = meta.get(MAX_RUN_SECONDS) if isinstance(meta, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return value


def for_owner(owner_key):
    """The meta an enqueue passes (``meta=``) to record who asked: ``owner_key`` a user id or "anonymous"."""
    return {OWNER: owner_key}


def for_periodic_run(schedule_id, when):
    """The meta of one run of a periodic job, due at ``when`` (aware datetime)."""
    return {SCHEDULE: schedule_id, SCHEDULED_FOR: when.isoformat()}


def for_template(schedule):
    """The meta of a periodic job's template (``queues.periodic.schedules.Schedule``)."""
    return {
        TEMPLATE_SCHEDULE: schedule.id,
        TEMPLATE_DIGEST: schedule.digest(),
        QUEUE: schedule.queue,
        "cron": schedule.cron,
        "interval": schedule.interval,
        "attempts": schedule.attempts,
        "timeout": schedule.timeout,
    }


def next_attempt(meta, attempt, failed_at, reason=""):
    """Attempt ``attempt`` failed at ``failed_at`` (aware datetime): the next one is due."""
    meta[ATTEMPT] = attempt + 1
    meta.setdefault(FIRST_FAILED_AT, _iso(failed_at))
    meta[LAST_FAILED_AT] = _iso(failed_at)
    if reason:
        meta[LAST_RETRY_REASON] = reason


def mark_dead(meta, reason, *, attempt, exc_type="", exc_message="", worker_name="", now=None):
    """Record a death (``reason``: exhausted, permanent, timeout, abandoned, stopped)."""
    now = now or dt.datetime.now(dt.UTC)
    meta[DEAD] = reason
    meta[DEAD_AT] = _iso(now)
    meta[DEATHS] = _int(meta.get(DEATHS, 0) or 0, 0) + 1
    meta[ATTEMPTS_MADE] = attempt
    meta.setdefault(FIRST_FAILED_AT, meta[DEAD_AT])
    meta[EXC_TYPE] = (exc_type or "")[:300]
    meta[EXC_MESSAGE] = (exc_message or "")[:2000]
    if worker_name:
        meta[DEAD_WORKER] = worker_name


def new_life(meta, requeued_at=None):
    """A dead job requeued by an operator starts again with a full set of attempts, and its total time
    (``optima_queue_job_total_seconds``) from ``requeued_at`` (unix seconds, the requeue's push), not
    from its first life's enqueue: the time it lay dead is not the queue's. True when the meta changed
    (it was dead)."""
    if not meta.get(DEAD):
        return False
    meta.pop(DEAD, None)
    meta[ATTEMPT] = 1
    meta.pop(FIRST_FAILED_AT, None)
    if requeued_at is not None:
        meta[FIRST_ENQUEUED_AT] = round(requeued_at, 3)
    return True


def mark_interrupted(meta, why):
    """The job went back to its queue without using up an attempt."""
    meta[INTERRUPTIONS] = _int(meta.get(INTERRUPTIONS, 0) or 0, 0) + 1
    meta.pop(DUE_AT, None)
    meta[LAST_INTERRUPTION] = why


# -- issue 32: put back by one of the app's own paths ------------------------------------------
# Not a meta key but a field of the job's hash, so that a push can write it atomically (an HSET in the
# push's MULTI or Lua script, no read-modify-write of ``meta``). Written with the push by: a retry
# (``failures/retry.queue_retry``), the requeue of a failed job (``failures/operations.requeue_failed``),
# the abandoned-job scan and every give-back of a popped job (``worker/abandoned``: the stop, a paused
# queue, the scan of intermediate lists), and — issue 34 — a resumable job's pause. Its value names the
# path. The pop takes it off the hash in the same script that moves the id (``worker/dequeue.py``): it
# vouches for one pop. A popped job whose status says it must not run again (finished, dead, stopped,
# started by a live worker: ``jobs/gate.replayed``) runs only when its pop carried this field.
PUT_BACK = "optima_put_back"
PUT_BACK_RETRY = "retry"
PUT_BACK_REQUEUE = "requeue"
PUT_BACK_ABANDONED = "abandoned"
PUT_BACK_GIVE_BACK = "give_back"
PUT_BACK_PAUSE = "pause"  # a resumable job's pause (issue 34)

# -- issue 36: the job's current execution ---------------------------------------------------
# Not a meta key but a field of the job's hash: the id of the execution now running it, written by the
# start in the HSET that writes the job STARTED. A started registry entry ``<job id>:<execution id>`` is
# the job's current one while this field names it (``queues/jobs/execution.py``: rq's execution hash,
# which named its worker, is not written any more).
EXECUTION = "optima_execution"

# The batch a job is a member of (issue 34, ``queues.workflows``): its id, written at the enqueue inside
# ``queues.batch()`` / ``queues.current_batch()``; a job in no batch has no such key. Not signed: the signed
# message is the job's ``data`` (function and arguments) and stays byte-identical; a writer to Redis who
# changes it can only miscount a batch, which they could do by writing the batch's keys (docs/workflows.md).
BATCH = "batch"
APP_OWNED = APP_OWNED | {BATCH}  # a caller's ``batch`` would make its job count in a batch
