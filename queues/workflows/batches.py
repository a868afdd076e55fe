"""Batches: ``queues.batch()``, ``queues.call()``, ``queues.current_batch()`` (issue 34, section 1).

``with queues.batch(on_success=queues.call("reports", "features.reports.jobs.rebuild"), ...) as b:``
opens a batch: its hash, its adders set holding ``block`` and its callbacks' jobs (built and signed now,
waiting ``deferred`` in no queue) are written in one MULTI. Every enqueue inside the block (``enqueue``,
``enqueue_call``, ``enqueue_many``, the outbox inside a transaction, any option) stamps the batch's id in
the job's meta (``queues/producer/joining.py``) and reports its id here; the block's close adds the ids
to the batch's members and removes ``block`` from its adders, in one MULTI (``scripts.SEAL``). An
enqueue inside a transaction joins at its commit (a rollback adds nothing); a block closed inside a
transaction is sealed at the commit, after the members of that transaction joined. An exception inside
the block: the members enqueued so far stay, and the batch is sealed with them (docs/workflows.md).

A running member opens ``with queues.current_batch():``: its id is an adder until the block closes (one
call), so the batch cannot complete while the member that may still add runs; the enqueues inside join
its batch. The counting of members is in ``hook.py``; the Lua in ``scripts.py``.
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from django.db import transaction
from rq.job import JobStatus
from rq.utils import now as rq_now
from rq.utils import utcformat

from queues import conf, rqcompat, testing
from queues.catalog.lookup import get_config
from queues.connection.clients import get_connection, unavailable
from queues.exceptions import InvalidJob
from queues.jobs import current, signing
from queues.jobs import meta as jobmeta
from queues.keyspace import keys
from queues.producer import api, inline, joining
from queues.producer.write import declared_queue
from queues.workflows import index, scripts

logger = logging.getLogger("queues.workflows")

KINDS = ("success", "complete", "death")  # on_success, on_complete, on_death
SETS = ("members", "done", "dead", "adders", "canceled")


@dataclass(frozen=True)
class Step:
    """``queues.call(queue, dotted_path, *args, **kwargs)``: a declared job to run later (a callback, a
    chain's step), validated now as an enqueue is."""

    queue: str
    func: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def call(queue: str, func: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> Step:
    """A declared job ``func(*args, **kwargs)`` on the declared queue ``queue``, to run later: a batch's
    callback (``queues.batch(on_success=queues.call(...))``, run with the keyword ``batch_id``). Refused
    now (``InvalidJob``, ``UnknownQueue``) as ``queues.enqueue`` would refuse it."""
    get_config(queue)  # UnknownQueue, naming the declared ones
    path = api.func_path(func)
    api._check_args(args, kwargs)
    if "batch_id" in kwargs:
        raise InvalidJob(
            f"queues.call({queue!r}, {path!r}, ...) has a keyword batch_id={kwargs['batch_id']!r}: a callback "
            "is given its batch's id as batch_id when it runs. Drop the keyword."
        )
    return Step(queue, path, tuple(args), dict(kwargs))


def _check_callback(kind: str, value: object) -> Step | None:
    if value is None or isinstance(value, Step):
        return value
    raise InvalidJob(
        f"on_{kind} must be queues.call(queue, 'dotted.path', *args, **kwargs) or None, got "
        f"{type(value).__name__} {value!r:.120}. Wrap the job: on_{kind}=queues.call('default', 'app.jobs.func')."
    )


def set_keys(batch_id: str) -> list[str]:
    """The KEYS of every script of ``scripts.py`` (but JOIN)."""
    return [keys.batch_key(batch_id), *(keys.batch_key(batch_id, part) for part in SETS), keys.batches_key()]


def _now_args() -> list[str]:
    """ARGV 2 and 3 of a script: now as rq writes a time (``enqueued_at``), and as unix seconds."""
    return [utcformat(rq_now()), f"{time.time():.6f}"]


class Adder:
    """One adder of a batch: the ``with`` block of ``queues.batch()`` (token ``block``) or of a running
    member's ``queues.current_batch()`` (its job id). What ``queues/producer/joining.py`` calls."""

    def __init__(self, batch_id: str, token: str) -> None:
        self.id = batch_id
        self.token = token
        self._ids: list[str] = []
        self._lock = threading.Lock()
        self._context: Any = None

    def joined(self, job_ids: list[str]) -> None:
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(lambda: self._add(job_ids))  # a rollback: no member
        else:
            self._add(job_ids)

    def _add(self, job_ids: list[str]) -> None:
        with self._lock:
            self._ids.extend(job_ids)

    def __enter__(self) -> "Adder":
        self._context = joining.OPEN.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        joining.OPEN.reset(self._context)
        if testing.inline_on():
            return self.ran_inline(exc_info[0] is None)
        # Sealed with what joined so far, whether the block raised or not (docs/workflows.md).
        if transaction.get_connection().in_atomic_block:
            transaction.on_commit(self.seal)  # after the members this transaction enqueued joined
        else:
            self.seal()

    def ran_inline(self, ok: bool) -> None:
        """``queues.testing.inline()``: the members ran at their enqueue; nothing is in Redis."""

    def seal(self) -> None:
        """The members join and this adder leaves, in one MULTI. Raises ``QueueUnavailable``."""
        with self._lock:
            ids, self._ids = self._ids, []
        connection = get_connection()
        batch_keys = set_keys(self.id)
        try:
            with connection.pipeline() as pipe:
                for start in range(0, len(ids), scripts.JOIN_CHUNK):
                    pipe.eval(
                        scripts.JOIN, 3, *batch_keys[0:2], batch_keys[5], *ids[start : start + scripts.JOIN_CHUNK]
                    )
                pipe.eval(scripts.SEAL, len(batch_keys), *batch_keys, self.token, *_now_args())
                pipe.execute()
        except redis.RedisError as exc:
            raise unavailable(exc) from exc


class Batch(Adder):
    """What ``with queues.batch(...) as b`` yields: ``b.id``; ``b.callbacks`` {kind: job id}."""

    def __init__(
        self, callbacks: dict[str, Step], description: str, owner: Any, batch_id: str | None = None, **fields: str
    ) -> None:
        super().__init__(batch_id or api._new_job_id(), "block")
        self.reopened = False  # a chain step's batch found in Redis (``_open``): its run of ``advance`` ran before
        self.fields = fields  # the batch of a chain's step: ``chain``, ``step`` (chains.py)
        self.description = description
        self.owner = owner
        self.steps = callbacks
        self.callbacks: dict[str, str] = {}

    def __enter__(self) -> "Batch":
        self._open()
        super().__enter__()
        return self

    def ran_inline(self, ok: bool) -> None:
        """``queues.testing.inline()``: every member ran (and succeeded) at its enqueue, so a block that ends
        without an exception runs ``on_success`` then ``on_complete`` now, in this thread; nothing is written to
        Redis (``batch_state`` knows no such batch)."""
        if ok:
            for kind in ("success", "complete"):
                if kind in self.steps:
                    inline.run(build(self.steps[kind], {"batch_id": self.id})[0])

    def _open(self) -> None:
        """The batch's hash, its ``block`` adder and its callbacks' deferred jobs, in one MULTI."""
        if testing.inline_on():
            return
        if self.fields and self._reopen():
            return
        label = next((self.steps[kind].queue for kind in ("complete", "success", "death") if kind in self.steps), "")
        ttl = get_config(label).options["result_ttl"] if label else conf.job_defaults()["result_ttl"]
        fields: dict[Any, Any] = {  # redis-py types the mapping invariantly
            "state": "open",
            "created_at": f"{time.time():.6f}",
            "description": self.description,
            "owner": "" if self.owner is None else json.dumps(self.owner),  # its type kept: a user id is an int
            "ttl": max(int(ttl), 60),
            "label": label,
            **self.fields,
        }
        jobs = []
        for kind, step in self.steps.items():
            job, queue = build(step, {"batch_id": self.id})
            jobs.append(job)
            self.callbacks[kind] = job.id
            fields.update({f"cb_{kind}": job.id, f"jk_{kind}": job.key, f"qk_{kind}": queue.key})
            fields["qs"] = queue.redis_queues_keys
        connection = get_connection()
        try:
            with connection.pipeline() as pipe:
                for job in jobs:
                    pipe.hset(job.key, mapping={k: v for k, v in job.to_dict().items() if v != ""})
                pipe.hset(keys.batch_key(self.id), mapping=fields)
                pipe.sadd(keys.batch_key(self.id, "adders"), "block")
                pipe.hincrby(keys.batches_key(), f"{label}|open", 1)
                index.add(pipe, self.id, float(fields["created_at"]))  # the panel's list of batches
                pipe.smembers(keys.workers_key())
                pipe.hkeys(keys.batch_workers_key())
                *_, registered, counting = pipe.execute()
        except redis.RedisError as exc:
            raise unavailable(exc) from exc
        _warn_of_older_workers(set(registered) - set(counting))

    def _reopen(self) -> bool:
        """A chain step's batch (its id derived from the chain's: ``chains._run_step``) opened by an earlier run
        of ``advance`` that was killed before it marked the step advanced: use it as it is (its callbacks' jobs
        made then), write nothing. -> whether it was found."""
        try:
            found = get_connection().hgetall(keys.batch_key(self.id))
        except redis.RedisError as exc:
            raise unavailable(exc) from exc
        if not found:
            return False
        for kind in self.steps:
            job_id = found.get(f"cb_{kind}".encode())
            if isinstance(job_id, bytes):
                self.callbacks[kind] = job_id.decode()
        self.reopened = True
        return True


_warned: set[bytes] = set()


def _warn_of_older_workers(older: set[bytes]) -> None:
    """A registered worker that does not count batch members runs an older release: the batches whose members
    it runs never complete. One WARNING per such worker and process (docs/workflows.md)."""
    new = older - _warned
    if new:
        _warned.update(new)
        names = ", ".join(sorted(k.decode("utf-8", "replace").rpartition(":")[2] for k in new))
        logger.warning(
            "queues.batch(): worker(s) %s are registered and do not count batch members (an older release, or "
            "started before this one): a batch whose member they run never completes. Deploy this release to "
            "every worker (docs/workflows.md, 'A batch needs every worker on this release').",
            names,
        )


def build(step: Step, extra_kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The signed job of ``step`` (its keyword arguments plus ``extra_kwargs``), not written: ``deferred``,
    in no queue, until a batch's script pushes its id. -> (job, queue)."""
    config = get_config(step.queue)
    queue = declared_queue(step.queue, config)
    job = queue.create_job(
        step.func,
        args=list(step.args),
        kwargs={**step.kwargs, **extra_kwargs},
        timeout=config.options["timeout"],
        result_ttl=config.options["result_ttl"],
        failure_ttl=config.options["failure_ttl"],
        job_id=api._new_job_id(),
        meta=jobmeta.for_enqueue(None, queue=step.queue, attempts=config.options["attempts"]),
    )
    job.origin = queue.name
    job.signature = signing.sign(job)
    rqcompat.set_status_in_hash(job, JobStatus.DEFERRED)
    return job, queue


def batch(
    on_success: Step | None = None,
    on_complete: Step | None = None,
    on_death: Step | None = None,
    description: str = "",
    meta: dict[str, Any] | None = None,
) -> Batch:
    """``with queues.batch(on_success=queues.call(...), ...) as b:``: the jobs enqueued inside are ``b.id``'s
    members. ``on_success``: every member finished; ``on_complete``: every member finished or dead;
    ``on_death``: the first member dead. Each runs once, with the keyword ``batch_id``. ``meta``:
    ``queues.owner_meta(key)`` makes ``key`` the batch's owner (``GET /batches/<id>/``). Refused at once
    (``InvalidJob``) for a callback that is not a ``queues.call``; ``QueueUnavailable`` at the open or the
    close when Redis does not answer."""
    callbacks = {}
    for kind, value in zip(KINDS, (on_success, on_complete, on_death), strict=True):
        step = _check_callback(kind, value)
        if step is not None:
            callbacks[kind] = step
    if not isinstance(description, str):
        raise InvalidJob(f"description must be a string, got {type(description).__name__} {description!r:.120}.")
    if meta is not None and (not isinstance(meta, dict) or set(meta) - {jobmeta.OWNER}):
        raise InvalidJob(
            f"meta of a batch may only be queues.owner_meta(owner_key) (who opened it), got {meta!r:.120}."
        )
    return Batch(callbacks, description, jobmeta.owner(meta) if meta else None)


def current_batch() -> Adder:
    """``with queues.current_batch():`` inside a running member: the enqueues inside join its batch, which
    does not complete before the block closes. ``InvalidJob`` outside a job, or in a job of no batch."""
    running = current.current_job()
    batch_id = running.meta.get(jobmeta.BATCH) if running is not None else None
    if running is None or not isinstance(batch_id, str) or not batch_id:
        where = "outside a running job" if running is None else f"in job {running.id}, which is in no batch"
        raise InvalidJob(
            f"queues.current_batch() was called {where}: it adds to the batch of the running member. Open a "
            "batch with queues.batch(...) instead."
        )
    return _RunningAdder(batch_id, running.id)


class _RunningAdder(Adder):
    def __enter__(self) -> "Adder":
        if testing.inline_on():  # the parent runs inline: its children run inline too, nothing to count
            return super().__enter__()
        batch_keys = set_keys(self.id)
        try:
            get_connection().eval(scripts.ADDER, len(batch_keys), *batch_keys, self.token)
        except redis.RedisError as exc:
            raise unavailable(exc) from exc
        return super().__enter__()
