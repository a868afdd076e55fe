"""Optima queues: RQ queues declared in settings, under an environment prefix.

Public API (stable names; everything else is internal)::

    from queues import enqueue, enqueue_call, enqueue_many, Call, fetch_job, get_queue, job, queue_names
    from queues import ENQUEUE_OPTIONS
    from queues import job_state, cancel, cache_connection
    from queues import UnknownQueue, QueueUnavailable, NotReplicated, InvalidJob, PermanentError, RetryAfter

``job_state(job_id)`` -> ``JobState`` or None (queues/jobs/state.py: one shape for a job in Redis, in the
outbox, or unreadable); ``cancel(job_id, request=None, reason="")`` -> ``Canceled`` (queues/producer/cancel.py);
``enqueue_many(name, func, calls, **options)`` -> [Job] (queues/producer/bulk.py: many jobs in one write,
each item of ``calls`` a tuple of arguments or a ``Call``);
``search_jobs(function=, queue=, state=, text=, owner=, start=0, page_size=25)`` -> ``Found`` (queues/search/find.py:
live jobs newest first, ``InvalidSearch`` for a bad criterion; ``SEARCH_STATES``, ``SEARCH_MAX_PAGE_SIZE``,
``SEARCH_MAX_START`` and ``SEARCH_TEXT_CHARS`` its limits);
``current_job()`` -> ``RunningJob`` or None (queues/jobs/current.py: inside a running job its ``id``, ``queue``,
``attempt``, ``meta`` and ``set_progress(done, total)``; None outside a job);
``owner_meta(owner_key)`` -> the ``meta=`` of an enqueue that records who asked, ``job_owner(meta)`` -> that owner
or None (queues/jobs/meta.py: the one definition of the key);
``perform(actor, action, targets, confirmed=False, owner=False, reason="")`` -> ``Outcome`` (queues/operator/:
every operator action — cancel, requeue, delete, retry, ... — with its permission check, confirmation rule and
audit row; each target's ``Result`` is done, refused or changed meanwhile);
``VIEW_QUEUE_PANEL``, ``ACT_ON_QUEUE_PANEL``: the permission names ``user.has_perm`` takes (queues/permissions.py);
Redis errors reach callers of these functions as ``QueueUnavailable`` only (never a redis exception);
``queues.testing``: ``inline()`` and the test run's own prefix (docs/adding-a-feature.md, "Testing");
``batch(on_success=None, on_complete=None, on_death=None, description="", meta=None)`` (a context manager),
``call(queue, func, *args, **kwargs)`` -> ``Step``, ``current_batch()``, ``batch_state(id)`` -> ``BatchState``
or None, ``cancel_batch(id, request=None, reason="")``, ``chain(*steps, pass_result=False)`` -> ``Chain``,
``group(*calls)``, ``chain_state(id)`` -> ``ChainState`` or None (queues/workflows/: docs/workflows.md);
``cache_connection()``: the cache Redis (``CACHE_REDIS_URL``) for a feature's own keys, e.g. rate limits.

The functions are imported lazily so that ``import queues`` never imports rq before settings
have exported the key prefix; type checkers and editors read them from the ``TYPE_CHECKING`` imports
below, which never run.
"""

import importlib
from typing import TYPE_CHECKING, Any

from queues.catalog.jobs import ENQUEUE_OPTIONS, job
from queues.exceptions import (
    InvalidJob,
    NotAJob,
    NotReplicated,
    PermanentError,
    QueuesError,
    QueueUnavailable,
    RetryAfter,
    UnknownQueue,
)
from queues.permissions import ACT_ON_QUEUE_PANEL, VIEW_QUEUE_PANEL

if TYPE_CHECKING:  # the same names as _LAZY below, for type checkers only
    from queues.catalog.lookup import fetch_job, get_queue, queue_names
    from queues.connection.clients import get_cache_connection as cache_connection
    from queues.jobs.state import job_state
    from queues.operator.actions import perform
    from queues.producer.api import enqueue, enqueue_call
    from queues.producer.bulk import Call, enqueue_many
    from queues.producer.cancel import cancel
    from queues.search.find import MAX_PAGE_SIZE as SEARCH_MAX_PAGE_SIZE
    from queues.search.find import MAX_START as SEARCH_MAX_START
    from queues.search.find import STATES as SEARCH_STATES
    from queues.search.find import TEXT_CHARS as SEARCH_TEXT_CHARS
    from queues.search.find import InvalidSearch, search_jobs
    from queues.workflows.batches import Step, batch, call, current_batch
    from queues.workflows.cancel import cancel_batch
    from queues.workflows.chains import Chain, ChainState, chain, chain_state, group
    from queues.workflows.state import BatchState, batch_state

__all__ = [
    "ENQUEUE_OPTIONS",
    "job",
    "enqueue",
    "enqueue_call",
    "enqueue_many",
    "Call",
    "fetch_job",
    "get_queue",
    "queue_names",
    "job_state",
    "cancel",
    "perform",
    "cache_connection",
    "search_jobs",
    "SEARCH_STATES",
    "SEARCH_MAX_PAGE_SIZE",
    "SEARCH_MAX_START",
    "SEARCH_TEXT_CHARS",
    "InvalidSearch",
    "InvalidJob",
    "NotAJob",
    "NotReplicated",
    "PermanentError",
    "QueuesError",
    "QueueUnavailable",
    "RetryAfter",
    "UnknownQueue",
    "current_job",
    "RunningJob",
    "owner_meta",
    "job_owner",
    "VIEW_QUEUE_PANEL",
    "ACT_ON_QUEUE_PANEL",
    "batch",
    "call",
    "Step",
    "current_batch",
    "batch_state",
    "BatchState",
    "cancel_batch",
    "chain",
    "group",
    "chain_state",
    "Chain",
    "ChainState",
]

_LAZY = {
    "enqueue": ("queues.producer.api", "enqueue"),
    "enqueue_call": ("queues.producer.api", "enqueue_call"),
    "enqueue_many": ("queues.producer.bulk", "enqueue_many"),
    "Call": ("queues.producer.bulk", "Call"),
    "fetch_job": ("queues.catalog.lookup", "fetch_job"),
    "get_queue": ("queues.catalog.lookup", "get_queue"),
    "queue_names": ("queues.catalog.lookup", "queue_names"),
    "job_state": ("queues.jobs.state", "job_state"),
    "cancel": ("queues.producer.cancel", "cancel"),
    "perform": ("queues.operator.actions", "perform"),
    "cache_connection": ("queues.connection.clients", "get_cache_connection"),
    "search_jobs": ("queues.search.find", "search_jobs"),
    "SEARCH_STATES": ("queues.search.find", "STATES"),
    "SEARCH_MAX_PAGE_SIZE": ("queues.search.find", "MAX_PAGE_SIZE"),
    "SEARCH_MAX_START": ("queues.search.find", "MAX_START"),
    "SEARCH_TEXT_CHARS": ("queues.search.find", "TEXT_CHARS"),
    "InvalidSearch": ("queues.search.find", "InvalidSearch"),
    "current_job": ("queues.jobs.current", "current_job"),
    "RunningJob": ("queues.jobs.current", "RunningJob"),
    "owner_meta": ("queues.jobs.meta", "for_owner"),
    "job_owner": ("queues.jobs.meta", "owner"),
    "batch": ("queues.workflows.batches", "batch"),
    "call": ("queues.workflows.batches", "call"),
    "Step": ("queues.workflows.batches", "Step"),
    "current_batch": ("queues.workflows.batches", "current_batch"),
    "batch_state": ("queues.workflows.state", "batch_state"),
    "BatchState": ("queues.workflows.state", "BatchState"),
    "cancel_batch": ("queues.workflows.cancel", "cancel_batch"),
    "chain": ("queues.workflows.chains", "chain"),
    "group": ("queues.workflows.chains", "group"),
    "chain_state": ("queues.workflows.chains", "chain_state"),
    "Chain": ("queues.workflows.chains", "Chain"),
    "ChainState": ("queues.workflows.chains", "ChainState"),
}

# The public functions that read or write Redis: their callers see ``QueueUnavailable``, never a redis
# exception (queues/connection/errors.py).
_TALKS_TO_REDIS = frozenset(
    {"enqueue", "enqueue_call", "enqueue_many", "fetch_job", "job_state", "cancel", "search_jobs", "perform"}
    | {"batch_state", "cancel_batch", "chain", "chain_state"}
)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        if name in _TALKS_TO_REDIS:
            value = importlib.import_module("queues.connection.errors").answers_unavailable(value)
        globals()[name] = value  # once: later lookups are plain
        return value
    raise AttributeError(f"module 'queues' has no attribute {name!r}")
