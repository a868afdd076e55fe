"""How a batch hears of its members: one hook of the worker (``queues/events/hooks.py``), installed at ready.

- ``success_into``: the member's count rides in the MULTI that records its success (``scripts.SUCCESS``
  queued on the worker's own pipeline: rq's ``handle_job_success`` in a work horse, ``fastpath.finish``
  in the fork-free and concurrent workers). No round trip is added, and the success and its count are
  written together or not at all: a worker SIGKILLed before the MULTI leaves a member that runs again
  and is counted then, once.
- ``dead_into``: a dead member's count rides in the MULTI that buries it (a worker's failure handling:
  rq's ``handle_job_failure``; the abandoned-job scan's ``deadletter.bury``); ``after_dead``, after every
  burial (also the gate's), counts it again where it was not: the DEAD script's SADD makes the second call a
  no-op. A job in no batch costs one dict lookup at each point. Both pass the member's ``retry_of`` (a dead
  letter retried as a new job takes the dead member's place) and DEAD its dead letter's retention.
- ``after_cancel``: a member canceled on its own (``queues.cancel``), or never written (a unique key's duplicate
  at the commit: ``producer/outbox.py``), leaves the batch (``scripts.LEAVE``).
- ``after_discard``: an operator discarded a dead member: the chain it is a step of is canceled.
- ``worker_start`` / ``worker_stop``: the worker is listed in ``<p>:optima:batch-workers`` while it runs, so
  that ``queues.batch()`` can warn of a registered worker of an older release (it would not count members).
"""

import logging
import time

from queues.connection.clients import get_connection
from queues.events.hooks import Hook
from queues.jobs import meta as jobmeta
from queues.keyspace import keys
from queues.workflows import chains, scripts
from queues.workflows.batches import _now_args, set_keys

logger = logging.getLogger("queues.workflows")


def batch_of(job) -> str | None:
    batch_id = job.meta.get(jobmeta.BATCH) if isinstance(job.meta, dict) else None
    return batch_id if isinstance(batch_id, str) and batch_id else None


def _retry_of(job) -> str:
    """The dead member ``job`` replaces (a dead letter retried as a new job: ``meta.retry_of``), or ''."""
    old = job.meta.get(jobmeta.RETRY_OF) if isinstance(job.meta, dict) else None
    return old if isinstance(old, str) else ""


def _kept(job) -> int:
    """How long ``job``'s dead letter is kept in Redis (its failure_ttl; -1: no expiry)."""
    ttl = job.failure_ttl
    return int(ttl) if isinstance(ttl, int | float) and ttl > 0 else -1


class BatchesHook(Hook):
    name = "batches"

    def worker_start(self, worker):
        """This worker counts batch members: ``queues.batch()`` warns of registered workers that do not."""
        worker.connection.hset(keys.batch_workers_key(), worker.key, f"{time.time():.0f}")

    def worker_stop(self, worker):
        worker.connection.hdel(keys.batch_workers_key(), worker.key)

    def success_into(self, job, pipe):
        batch_id = batch_of(job)
        if batch_id is not None:
            batch_keys = set_keys(batch_id)
            pipe.eval(scripts.SUCCESS, len(batch_keys), *batch_keys, job.id, *_now_args(), _retry_of(job))

    def dead_into(self, job, pipe):
        batch_id = batch_of(job)
        if batch_id is not None:
            batch_keys = set_keys(batch_id)
            pipe.eval(scripts.DEAD, len(batch_keys), *batch_keys, job.id, *_now_args(), _retry_of(job), _kept(job))

    def after_dead(self, job, queue, *, reason, duration=0.0, exc_info=None, exc_string=""):
        batch_id = batch_of(job)
        if batch_id is not None:
            batch_keys = set_keys(batch_id)
            job.connection.eval(
                scripts.DEAD, len(batch_keys), *batch_keys, job.id, *_now_args(), _retry_of(job), _kept(job)
            )

    def after_cancel(self, job_id, meta):
        """A member canceled on its own: the batch stops waiting for it (``scripts.LEAVE``)."""
        batch_id = meta.get(jobmeta.BATCH) if isinstance(meta, dict) else None
        if isinstance(batch_id, str) and batch_id:
            batch_keys = set_keys(batch_id)
            get_connection().eval(scripts.LEAVE, len(batch_keys), *batch_keys, job_id, *_now_args())

    def after_discard(self, job, queue):
        """A dead member discarded: its batch stays ``completed_with_dead``; the chain it is a step of stops."""
        batch_id = batch_of(job)
        if batch_id is not None:
            chain_id = job.connection.hget(keys.batch_key(batch_id), "chain")
            if chain_id:
                chains.cancel_after_discard(job.connection, chain_id.decode())
