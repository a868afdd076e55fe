"""Bulk enqueue: ``queues.enqueue_many(name, func, calls, **options)``, many jobs of one declared function.

Every job is validated, built and signed as ``queues.enqueue`` does it (queues/producer/api.py), then
the whole batch is written in one MULTI (``write.write_many``): one round trip for the batch, and all
of it or nothing. A bad item fails the whole call before anything is written, with an error naming
its index. Inside ``transaction.atomic()`` (or with ``durable=True``) the batch goes through the
outbox: one row per job (so ``job_state``, ``cancel`` and the relay treat each job as they treat any
other), inserted in one statement, pushed after the commit in one MULTI and deleted in one statement.

``calls`` is a list; each item is one job:

- a tuple or list: its positional arguments (``(42,)``, ``[42, "full"]``, ``()``);
- ``queues.Call(args=(), kwargs=None, job_id=None, meta=None)``: keyword arguments, an own job id
  (must not exist in Redis: the batch is refused if one does), or meta merged over the common ``meta=``.

A dict is refused (one positional argument, or keyword arguments?): say which with ``(the_dict,)``
or ``queues.Call(kwargs=the_dict)``. The options are the batch's: ``attempts``, ``timeout``,
``delay``/``at`` (one due time for all), ``durable``, ``limit_key``/``limit_concurrency`` (one key
for all), ``priority``, ``meta``. ``unique=`` is refused: whether each key's job still waits is a
read per key before the write; enqueue such jobs one by one with ``queues.enqueue(..., unique=)``.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from queues import testing, tracing
from queues.catalog.lookup import get_config
from queues.exceptions import InvalidJob
from queues.jobs import meta as jobmeta
from queues.jobs import signing
from queues.producer import api, inline, joining, outbox_many
from queues.producer.write import declared_queue, write_many

if TYPE_CHECKING:
    import datetime as dt

    from rq.job import Job

MAX_BATCH = 10_000  # jobs per call: one MULTI holds them all in the client's and the server's memory


@dataclass(frozen=True)
class Call:
    """One job of ``queues.enqueue_many``: its arguments, and optionally its own job id and meta."""

    args: tuple[Any, ...] | list[Any] = ()
    kwargs: dict[str, Any] | None = None
    job_id: str | None = None
    meta: dict[str, Any] | None = None


def enqueue_many(
    name: str,
    func: Callable[..., Any] | str,
    calls: Iterable[tuple[Any, ...] | list[Any] | Call],
    *,
    attempts: int | None = None,
    timeout: float | None = None,
    delay: "float | dt.timedelta | None" = None,
    at: "dt.datetime | None" = None,
    durable: bool = False,
    limit_key: str | None = None,
    limit_concurrency: int | None = None,
    priority: int = 0,
    meta: dict[str, Any] | None = None,
    unique: Literal[False] | None = None,
    max_run_seconds: float | None = None,
) -> list["Job"]:
    """Enqueue one job of ``func`` per item of ``calls`` on the declared queue ``name``, in one write;
    returns the rq Jobs in the order of ``calls``. All or nothing: a bad item raises ``InvalidJob``
    (naming its index) and nothing is written; a Redis failure raises ``QueueUnavailable``."""
    if unique is not None and unique is not False:
        raise InvalidJob(
            f"enqueue_many does not take unique= (got {unique!r}): whether a key's job still waits is read "
            "per key before its write, which a one-round-trip batch cannot do. Enqueue such jobs one by one "
            "with queues.enqueue(..., unique=<key>)."
        )
    config = get_config(name)
    path = api.func_path(func)
    options = config.options
    overrides = {k: v for k, v in (("attempts", attempts), ("timeout", timeout)) if v is not None}
    if overrides:
        from queues import conf  # no cycle: to the top once issue 32's edits here are merged

        api._check_option(conf.validate_job_options(f"enqueue_many({name!r}, ...)", overrides))
        options = {**options, **overrides}
    when = None if delay is None and at is None else api._resolve_when(delay, at)
    if durable is not True and durable is not False:
        raise InvalidJob(f"durable must be True or False, got {durable!r}.")
    limit = api._check_limit(name, config, limit_key, limit_concurrency)
    api._check_priority(priority, limit)
    api.check_max_run_seconds(max_run_seconds)
    if meta is not None:
        api._check_json(meta, "meta")
        if not isinstance(meta, dict):
            raise InvalidJob(f"meta must be a dict, got {type(meta).__name__} {meta!r}.")
        api.check_meta_keys(meta, "meta")
    items = _items(calls)
    if max_run_seconds is None:  # per enqueue, then the queue's option (conf.JOB_DEFAULTS)
        max_run_seconds = options.get("max_run_seconds")

    queue = declared_queue(name, config)
    jobs = []
    batch = joining.current()  # inside queues.batch(): every job is a member (queues/producer/joining.py)
    if batch is not None:
        joining.check_member(name, config.server)
    for args, kwargs, job_id, own_meta in items:
        extra = {**meta, **own_meta} if meta and own_meta else (own_meta or meta)
        if batch is not None:
            extra = {**(extra or {}), jobmeta.BATCH: batch.id}
        job = queue.create_job(
            path,
            args=list(args),
            kwargs=kwargs,
            timeout=options["timeout"],
            result_ttl=options["result_ttl"],
            failure_ttl=options["failure_ttl"],
            job_id=job_id or api._new_job_id(),
            meta=jobmeta.for_enqueue(
                extra, queue=name, attempts=options["attempts"], priority=priority, max_run_seconds=max_run_seconds
            ),
        )
        api._apply_limit(job, limit)
        job.signature = signing.sign(job)
        api.check_size(job, f"queues.enqueue_many({name!r}, {path!r}, ...)")
        jobs.append(job)
    if not jobs:
        return []
    explicit_ids = any(job_id is not None for _, _, job_id, _ in items)
    if tracing.on:  # one PRODUCER span for the batch; every job carries its context (queues/tracing/)
        from queues.tracing import spans

        with spans.sending(name, jobs):
            placed = _place(queue, jobs, when, explicit_ids=explicit_ids, durable=durable)
    else:
        placed = _place(queue, jobs, when, explicit_ids=explicit_ids, durable=durable)
    if batch is not None and not testing.inline_on():
        batch.joined([job.id for job in jobs])
    return placed


def _place(queue, jobs, when, *, explicit_ids, durable):
    """Write the built, signed ``jobs`` now, or through the outbox."""
    if testing.inline_on():  # queues.testing.inline(): run now, write nothing
        return inline.run_all(jobs)
    if durable or api._in_transaction():
        outbox_many.stage_many(queue, jobs, when, explicit_ids=explicit_ids)
        return jobs
    write_many(queue, jobs, when, explicit_ids=explicit_ids)
    return jobs


def _items(calls):
    """``calls`` checked item by item: -> [(args, kwargs, job_id, meta)]; the first bad item raises."""
    if isinstance(calls, (str, bytes, dict)) or not hasattr(calls, "__iter__"):
        raise InvalidJob(
            f"calls must be a list of argument tuples or queues.Call, got {type(calls).__name__} "
            f"{calls!r:.200}. E.g. queues.enqueue_many(name, func, [(1,), (2,)])."
        )
    items = []
    seen = {}
    for i, item in enumerate(calls):
        if len(items) >= MAX_BATCH:
            raise InvalidJob(
                f"calls has more than {MAX_BATCH} items: one call writes its jobs in one MULTI. "
                f"Split them into calls of at most {MAX_BATCH} (each is all or nothing)."
            )
        if isinstance(item, Call):
            args, kwargs, job_id, meta = item.args, {} if item.kwargs is None else item.kwargs, item.job_id, item.meta
        elif isinstance(item, (tuple, list)):
            args, kwargs, job_id, meta = item, {}, None, None
        elif isinstance(item, dict):
            raise InvalidJob(
                f"calls[{i}] is a dict {item!r:.200}: one positional argument, or keyword arguments? "
                f"Pass ({item!r:.60},) for one argument, or queues.Call(kwargs={item!r:.60})."
            )
        else:
            raise InvalidJob(
                f"calls[{i}] is {type(item).__name__} {item!r:.200}; each item is a tuple of the "
                f"job's positional arguments or a queues.Call. Pass ({item!r:.60},) for one argument."
            )
        try:
            api._check_args(args, kwargs)
            if meta is not None:
                api._check_json(meta, "meta")
                if not isinstance(meta, dict):
                    raise InvalidJob(f"meta must be a dict, got {type(meta).__name__} {meta!r:.200}.")
                api.check_meta_keys(meta, "meta")
            if job_id is not None:
                api._check_job_id(job_id)
        except InvalidJob as exc:
            raise InvalidJob(f"calls[{i}]: {exc} Nothing of the batch was enqueued.") from None
        if job_id is not None:
            if job_id in seen:
                raise InvalidJob(
                    f"calls[{i}] has job_id={job_id!r}, as calls[{seen[job_id]}] has: one id, one "
                    "job. Give each a different job_id. Nothing of the batch was enqueued."
                )
            seen[job_id] = i
        items.append((args, kwargs, job_id, meta))
    return items
