"""The worker's one interface to its cross-cutting concerns, in the manner of dramatiq's middleware.

The worker and the failure handler import none of the concerns (metrics, tracing, logs, batches to
come): at each point of a job's life they call this module, which calls the hooks the app installed at
its ready (``queues/apps.py``: ``install``). A hook subclasses ``Hook`` and overrides only what it needs;
every method of ``Hook`` is a no-op, and a point calls only the hooks that override it (a loop over a
short list, no allocation on the way). Every kind of worker calls the same points: the forking worker
(its work horse), the fork-free one (``--no-fork``), the concurrent one (``--concurrency N``: its
threads) and ``rqworker-pool``'s.

=======================  ====================================================  ===================
point                    when, and where                                       used by
=======================  ====================================================  ===================
``worker_init``          a worker object is made (every kind)                  logs (rq's quiet)
``worker_start``         its housekeeping starts (before any job)              metrics
``worker_stop``          its housekeeping stopped, the last writes made        metrics
``before_process``       an attempt's start is recorded, before the job runs   signals
``processing``           around the job's run: a context manager, or None      tracing
``after_raise``          the job raised (before the failure is handled)        tracing
``before_success_write`` a success is about to be written by the worker's      metrics
                         own one call (the fork-free path, ``fastpath.py``)
``after_success``        the success is recorded; ``carried``: the call of     logs, signals
                         ``before_success_write`` rode on its write
``after_failure``        an attempt failed; ``will_retry``                     signals
``after_retry``          the next attempt is scheduled; ``duration`` None      logs, signals
                         when no attempt of this process failed (abandoned)
``after_dead``           the job is in the dead letter (``reason``)            logs, signals
``pending``              the hooks hold writes for the worker's next pipeline  metrics
``write_into``           queue those writes into the worker's pipeline         metrics
``restore``              that pipeline failed: take them back                  metrics
``hand_over``            in a work horse before it exits: what it holds        metrics
``take_over``            in the worker: what a horse handed over               metrics
``horse_exit``           a work horse is about to ``os._exit``                 tracing
``heartbeat``            a due heartbeat was written                           metrics (history)
``success_into``         queue into the MULTI that records a job's success     batches
                         the writes that must land with it, or not at all
                         (every kind of worker: ``worker/adapter.py``)
``after_discard``        an operator discarded the job's dead letter (any      batches (chains)
                         process: ``failures/operations.py``)
``after_cancel``         a job that had not started was canceled (any          batches
                         process: ``producer/cancel.py``)
``dead_into``            queue into the MULTI that buries a job (rq's          batches
                         ``handle_job_failure``) the writes that must land
                         with its death; ``after_dead`` follows as before
=======================  ====================================================  ===================

A hook must be cheap and must not raise: an error that escapes a job point is logged (logger
``queues.events``) and never fails the job, as the signals' receivers (``signals.py``).
"""

import logging
from contextlib import ExitStack
from typing import Any

logger = logging.getLogger("queues.events")


class Hook:
    """One concern of the worker. ``name`` keys what a work horse hands over to its worker."""

    name = "hook"

    # -- the worker -------------------------------------------------------------------------
    def worker_init(self, worker):
        """A worker object was made (in its ``__init__``)."""

    def worker_start(self, worker):
        """The worker's housekeeping starts: from now on the worker writes what ``pending`` says."""

    def worker_stop(self, worker):
        """The worker's housekeeping stopped; its last pipeline is written."""

    def pending(self):
        """True when this hook holds writes for the worker's next pipeline."""
        return False

    def write_into(self, pipe):
        """Queue the held writes into ``pipe`` (the caller executes it); -> a token for ``restore``."""

    def restore(self, token):
        """The pipeline ``write_into`` wrote into failed: hold its writes again."""

    def hand_over(self):
        """In a work horse about to exit: what it holds, as JSON-able data (None: nothing)."""

    def take_over(self, data):
        """In the worker: what one of its horses handed over (``hand_over``)."""

    def horse_exit(self):
        """A work horse is about to leave with ``os._exit``."""

    def heartbeat(self, connection):
        """The worker wrote a due heartbeat (every few seconds)."""

    # -- one job ----------------------------------------------------------------------------
    def before_process(self, job, queue):
        """An attempt's start is recorded; the job runs next. ``queue``: its declared name."""

    def processing(self, job):
        """A context manager around the job's run, or None."""

    def after_raise(self, job, exc_info):
        """The job raised; its failure is handled next."""

    def before_success_write(self, job, queue, duration):
        """The success is about to be written by the worker's own one call, which carries ``write_into``."""

    def after_success(self, job, queue, duration, carried):
        """The success is recorded. ``carried``: ``before_success_write`` was called for it."""

    def after_failure(self, job, queue, exc_info, duration, will_retry):
        """An attempt failed (``exc_info`` None when no exception is known, e.g. a dead worker's job)."""

    def after_retry(self, job, queue, *, attempt, delay, reason, duration=None, exc_info=None, exc_string=""):
        """Attempt ``attempt`` (1-based) failed and the next one runs in ``delay`` seconds."""

    def after_dead(self, job, queue, *, reason, duration=0.0, exc_info=None, exc_string=""):
        """The job is in the dead letter."""

    def success_into(self, job, pipe):
        """Queue on ``pipe`` (the MULTI that records ``job``'s success) what must be written with the success
        itself: written in the same transaction, no round trip of its own (a batch member's count)."""

    def after_discard(self, job, queue):
        """An operator discarded the dead letter of ``job`` (read before its hash was deleted)."""

    def dead_into(self, job, pipe):
        """Queue on ``pipe`` (the MULTI that buries ``job``) what must be written with its death (``success_into``'s
        twin; ``after_dead`` is still called after it, and for the burials made elsewhere)."""

    def after_cancel(self, job_id, meta):
        """The job ``job_id`` (its ``meta``, {} when unknown) was canceled before it started: it never runs."""


POINTS = [name for name, value in vars(Hook).items() if callable(value) and not name.startswith("_")]

_hooks: list["Hook"] = []
_points: dict[str, list[Any]] = {point: [] for point in POINTS}  # point -> bound methods of the hooks that override it


def install(*hooks):
    """Make ``hooks`` the installed ones, in this order (the app's ready; idempotent)."""
    _hooks[:] = hooks
    for point in POINTS:
        _points[point][:] = [
            getattr(hook, point) for hook in hooks if getattr(type(hook), point) is not getattr(Hook, point)
        ]


def installed():
    return list(_hooks)


def _each(point, *args, **kwargs):
    for call in _points[point]:
        try:
            call(*args, **kwargs)
        except Exception:  # noqa: BLE001 — a hook never fails the job (module docstring)
            logger.exception("queues hook %r failed at %s", call.__self__, point)


# -- the worker -------------------------------------------------------------------------------
def worker_init(worker):
    _each("worker_init", worker)


def worker_start(worker):
    _each("worker_start", worker)


def worker_stop(worker):
    _each("worker_stop", worker)


def pending():
    for call in _points["pending"]:
        if call():
            return True
    return False


def write_into(pipe):
    """-> the tokens to ``restore`` if the pipeline fails."""
    return [(call.__self__, call(pipe)) for call in _points["write_into"]]


def restore(tokens):
    for hook, token in tokens:
        hook.restore(token)


def hand_over():
    """{hook name: data} of what the hooks of a work horse hold; empty when nothing."""
    handed = {}
    for call in _points["hand_over"]:
        data = call()
        if data is not None:
            handed[call.__self__.name] = data
    return handed


def take_over(handed):
    for hook in _hooks:
        if hook.name in handed:
            hook.take_over(handed[hook.name])


def horse_exit():
    _each("horse_exit")


def heartbeat(connection):
    _each("heartbeat", connection)


# -- one job ----------------------------------------------------------------------------------
def before_process(job, queue):
    _each("before_process", job, queue)


def processing(job):
    """A context manager for the job's run, or None when no hook wraps it (nothing to enter)."""
    found = None
    for call in _points["processing"]:
        context = call(job)
        if context is not None:
            found = context if found is None else _Both(found, context)
    return found


class _Both:
    """Two hooks' contexts entered as one, the first outermost."""

    def __init__(self, outer, inner):
        self.outer, self.inner, self.stack = outer, inner, ExitStack()

    def __enter__(self):
        self.stack.__enter__()
        self.stack.enter_context(self.outer)
        self.stack.enter_context(self.inner)
        return self

    def __exit__(self, *exc_info):
        return self.stack.__exit__(*exc_info)


def after_raise(job, exc_info):
    _each("after_raise", job, exc_info)


def before_success_write(job, queue, duration):
    _each("before_success_write", job, queue, duration)


def after_success(job, queue, duration, carried=False):
    _each("after_success", job, queue, duration, carried)


def after_failure(job, queue, exc_info, duration, will_retry):
    _each("after_failure", job, queue, exc_info, duration, will_retry)


def after_retry(job, queue, *, attempt, delay, reason, duration=None, exc_info=None, exc_string=""):
    _each(
        "after_retry",
        job,
        queue,
        attempt=attempt,
        delay=delay,
        reason=reason,
        duration=duration,
        exc_info=exc_info,
        exc_string=exc_string,
    )


def after_dead(job, queue, *, reason, duration=0.0, exc_info=None, exc_string=""):
    _each("after_dead", job, queue, reason=reason, duration=duration, exc_info=exc_info, exc_string=exc_string)


def success_into(job, pipe):
    """Queue the hooks' writes of ``job``'s success on ``pipe``. Unlike a job point, an error here is
    raised: the success's MULTI must not be written without them."""
    for call in _points["success_into"]:
        call(job, pipe)


def after_discard(job, queue):
    _each("after_discard", job, queue)


def after_cancel(job_id, meta):
    _each("after_cancel", job_id, meta)


def dead_into(job, pipe):
    """Queue the hooks' writes of ``job``'s burial on ``pipe``; an error is raised, as in ``success_into``."""
    for call in _points["dead_into"]:
        call(job, pipe)
