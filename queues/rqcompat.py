"""Every use of a private member of rq 3.0 (and rq-scheduler 0.14) in this project, in one place.

The worker, the schedulers and the retry path need a few things rq keeps private: the flag its
work loop reads to stop, the queue order it dequeues in, the horse's pid, the job id its stop-job
command marks, the scheduler's child process and locks. Nothing else in ``queues/`` or
``features/`` touches an underscored member of rq, rq-scheduler or django-rq: it calls these
functions, or overrides a method ``MEMBERS`` lists. ``MEMBERS`` lists every one, and
``tests/queues/test_rqcompat.py`` fails

- with a clear message when an installed rq no longer has one (``missing_members``), before
  anything subtle breaks at run time;
- naming file and line when code elsewhere uses a private name those libraries define (it reads
  their installed source), or when this module uses one ``MEMBERS`` does not list.
"""

import importlib
from typing import Any

import rq
import rq_scheduler
from rq import serializers
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.scheduler import RQScheduler
from rq.worker import BaseWorker
from rq_scheduler import Scheduler

# (class, attribute, where rq sets it: "class" attribute or method, or "instance" set in __init__)
MEMBERS = [
    (BaseWorker, "_stop_requested", "instance"),  # the work loop stops when true
    (BaseWorker, "_shutdown_requested_date", "instance"),  # when the stop was asked (rq shows it)
    (BaseWorker, "_ordered_queues", "instance"),  # the queues in dequeue order (rq's strategies reorder it)
    (BaseWorker, "_horse_pid", "instance"),  # the forked horse; 0 when none
    (BaseWorker, "_stopped_job_id", "instance"),  # set by rq's stop-job command
    (BaseWorker, "_state", "instance"),  # the state set_state last recorded
    (BaseWorker, "_release_slot_safely", "class"),  # frees a rate-limit slot after a retry
    (BaseWorker, "_install_signal_handlers", "class"),  # rq calls it after bootstrap; WorkerBehaviour overrides it
    (BaseWorker, "_start_scheduler", "class"),  # rq's work() starts its scheduler so; WorkerBehaviour overrides it
    (Queue, "_enqueue_job", "class"),  # push a prepared job in a pipeline (rq's own retry does it)
    (Queue, "_is_async", "instance"),  # the is_async a queue was built with (the panel's read-only copy keeps it)
    (Job, "_handle_success", "class"),  # rq's success write of a job; OptimaJob's keeps a result per attempt
    (Job, "_handle_failure", "class"),  # rq's failure write of a job; likewise (queues/jobs/stream.py)
    (Job, "_execute", "class"),  # calls the job's function; OptimaJob's hands a coroutine to rqworker --async's loop
    (Job, "_exc_info", "instance"),  # a job's cached failure text (the panel's requeue clears it)
    (Job, "_dependency_ids", "instance"),  # the ids a job depends on, as read from its hash (no fetch)
    (Job, "_status", "instance"),  # the status to_dict writes (our enqueue writes the hash with it once)
    (RQScheduler, "_process", "instance"),  # the scheduler child process of a worker
    (RQScheduler, "_acquired_locks", "instance"),
    (RQScheduler, "_queue_names", "instance"),
    (RQScheduler, "_scheduled_job_registries", "instance"),
    (RQScheduler, "_stop_requested", "instance"),
    (RQScheduler, "_install_signal_handlers", "class"),
    (Scheduler, "_lock_acquired", "instance"),  # rq-scheduler's lock flag
    (Scheduler, "_interval", "instance"),  # rq-scheduler's polling interval, seconds
    (Job, "_success_callback_name", "instance"),  # callback names as stored: signed, and checked
    (Job, "_failure_callback_name", "instance"),  # against the declared jobs before rq imports them
    (Job, "_stopped_callback_name", "instance"),
    (Job, "_unreadable_meta", "instance"),  # a meta rq could not decode (its bytes kept aside)
    (Job, "_result", "instance"),  # the legacy result field as decoded (a poison one is a placeholder)
    (Execution, "_job", "instance"),  # the execution's job, which rq fetches with pickle
]

VERSIONS = f"rq {rq.__version__}, rq-scheduler {getattr(rq_scheduler, '__version__', '?')}"


def missing_members(instances=()):
    """["Class.attr", ...] that the installed rq lacks. ``instances``: objects of the classes above
    (built by the caller with a connection), to check the attributes rq sets in ``__init__``."""
    found = []
    for owner, name, kind in MEMBERS:
        if kind == "class":
            present = hasattr(owner, name)
        else:
            built = [obj for obj in instances if isinstance(obj, owner)]
            present = any(hasattr(obj, name) for obj in built) if built else True
        if not present:
            found.append(f"{owner.__module__}.{owner.__qualname__}.{name}")
    return found


# -- worker ----------------------------------------------------------------------------------
def stop_requested(worker):
    return worker._stop_requested


def request_stop(worker, when):
    """Make rq's work loop stop before its next dequeue."""
    worker._shutdown_requested_date = when
    worker._stop_requested = True


def ordered_queues(worker):
    return list(worker._ordered_queues)


def horse_pid(worker):
    return worker._horse_pid


def set_horse_pid(worker, pid):
    worker._horse_pid = pid


def stopped_job_id(worker):
    """The job id rq's stop-job command asked this worker to stop, or None."""
    return worker._stopped_job_id


def forget_stopped_job(worker):
    worker._stopped_job_id = None


class StoppedJobPerThread:
    """Mixin of a worker that runs several jobs at once (``queues.worker.concurrent``): rq's single
    ``_stopped_job_id`` slot (its stop-job mark, which rq's ``handle_job_failure`` and ours read) is
    answered per job thread by the worker's ``stopped_job_here()`` and cleared by its
    ``forget_stopped_job_here()``. rq's stop-job commands themselves are routed by the worker, never
    through this slot."""

    @property
    def _stopped_job_id(self):
        return self.stopped_job_here()

    @_stopped_job_id.setter
    def _stopped_job_id(self, value):
        if value is None:
            self.forget_stopped_job_here()


def remember_state(worker, state):
    """What set_state would have recorded, kept in memory while Redis is away."""
    worker._state = state


def install_signal_handlers(worker):
    worker._install_signal_handlers()


def install_rq_signal_handlers(worker):
    """rq's own SIGINT/SIGTERM handlers (its ``request_stop``), bypassing any override."""
    BaseWorker._install_signal_handlers(worker)


def release_slot(worker, job):
    worker._release_slot_safely(job)


def enqueue_prepared(queue, job, pipeline):
    """Push ``job`` (already saved in ``pipeline``) onto ``queue`` (rq's own retry path)."""
    queue._enqueue_job(job, pipeline=pipeline)


def rq_enqueue_job(queue, job, pipeline=None, at_front=False, unique=False):
    """rq's own push of a prepared job onto ``queue.key`` (OptimaQueue's band-aware ``_enqueue_job`` calls it
    on the queue, or on a view of the queue whose key is one of its priority bands)."""
    return Queue._enqueue_job(queue, job, pipeline=pipeline, at_front=at_front, unique=unique)


def clear_exc_info(job):
    job._exc_info = ""


def is_async(queue):
    """Whether ``queue`` runs its jobs through a worker (False: at enqueue, in the caller)."""
    return queue._is_async


# -- jobs ---------------------------------------------------------------------------------------
def set_status_in_hash(job, status):
    """Give ``job`` the status its hash will be written with (``to_dict``), as rq's
    ``Queue._prepare_for_queue`` does: ``Job.set_status`` would send an HSET of its own."""
    job._status = status


def callback_names(job):
    """(success, failure, stopped) callback names as the job hash holds them (None when unset),
    read without importing anything."""
    return (job._success_callback_name, job._failure_callback_name, job._stopped_callback_name)


def unreadable_meta(job):
    """The raw bytes of a meta rq could not decode (it then shows ``{"unserialized": ...}``), or None."""
    return getattr(job, "_unreadable_meta", None)


def cached_result(job: Job) -> Any:
    return job._result


def names_dependencies(job: Job) -> bool:
    """Whether the job was enqueued depending on other jobs (its hash's ``dependency_ids``; nothing fetched)."""
    return bool(job._dependency_ids)


def set_execution_job(execution, job):
    """Give an rq Execution its job, read as JSON by the caller (``Execution.job`` would fetch it
    with rq's default serializer, pickle)."""
    execution._job = job


# -- RQ's scheduler (inside rqworker) ----------------------------------------------------------
def scheduler_process(scheduler):
    return scheduler._process if scheduler is not None else None


def scheduler_queue_names(scheduler):
    return scheduler._queue_names


def scheduler_locks(scheduler):
    return scheduler._acquired_locks


def set_scheduler_locks(scheduler, names):
    """Record the locks held; rq re-reads its scheduled registries after any change."""
    scheduler._acquired_locks = set(names)
    scheduler._scheduled_job_registries = []


def forget_scheduled_registries(scheduler):
    scheduler._scheduled_job_registries = []


def scheduler_stop_requested(scheduler):
    return scheduler._stop_requested


def install_scheduler_signal_handlers(scheduler):
    scheduler._install_signal_handlers()


# -- rq-scheduler (manage.py rqscheduler) -------------------------------------------------------
def periodic_interval(scheduler):
    """Seconds between two polls of rq-scheduler's ``run()`` loop."""
    return scheduler._interval


def release_periodic_lock_flag(scheduler):
    """rq-scheduler believes it holds its lock until told otherwise (after a Redis outage)."""
    scheduler._lock_acquired = False


# -- rq's serializer lookup, memoized ------------------------------------------------------------
# rq resolves a serializer (``rq.serializers.resolve_serializer``) every time it builds a Job, a
# registry or a Result: four times or more per job a worker runs. Its check, ``isinstance(s,
# Serializer)`` against a runtime-checkable Protocol, walks the protocol's members on every call on
# Python 3.11 (~50 us; 3.12 caches them): ~0.2 ms of CPU per job, 6 % of a fork-free no-op job and
# more under ``--concurrency``, where every job thread waits for the GIL (bench/README.md, "Issue 21,
# the last figures"). Its answer for one serializer never changes, so the modules that imported it
# by name get a memo of it instead; what rq raises for a bad serializer is raised as before.
RESOLVERS = ("rq.cron", "rq.job", "rq.queue", "rq.registry", "rq.results", "rq.scheduler", "rq.worker.base")
_resolved: dict[object, object] = {}


def resolve_serializer(serializer=None):
    """``rq.serializers.resolve_serializer``, remembered per (hashable) serializer."""
    try:
        return _resolved[serializer]
    except (KeyError, TypeError):
        pass
    found = serializers.resolve_serializer(serializer)
    try:
        _resolved[serializer] = found
    except TypeError:  # an unhashable serializer object: not remembered
        pass
    return found


def memoize_serializer_lookup():
    """Point rq's modules at ``resolve_serializer`` above (idempotent; AppConfig.ready)."""
    for name in RESOLVERS:
        module = importlib.import_module(name)
        if getattr(module, "resolve_serializer", None) is not None:
            module.resolve_serializer = resolve_serializer
