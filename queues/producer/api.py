"""Enqueueing: validation first, then one atomic write (or none).

Everything that can be wrong with a job — unknown queue, a function that is not a declared job
(queues/catalog/jobs.py), a non-JSON argument, a bad option — is refused here, before anything reaches Redis, with an
error naming the argument, the value and the fix. Inside ``transaction.atomic()`` (and with
``durable=True``) the job goes through the outbox (queues/producer/outbox.py): a row in the caller's
transaction, written to Redis after the commit or by a relay, so a rollback enqueues nothing and a
commit never loses the job; the caller gets the job id at once either way (the Job is built and
signed now). Outside a transaction, without ``durable``, the write is now and a Redis failure
raises ``QueueUnavailable`` (fail fast).
"""

import contextlib
import datetime as dt
import logging
import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.utils import timezone
from rq.job import JOB_ID_PATTERN

from queues import conf, testing, tracing
from queues.catalog import jobs as catalog
from queues.catalog.lookup import get_config
from queues.connection.clients import unavailable
from queues.exceptions import InvalidJob
from queues.jobs import meta as jobmeta
from queues.jobs import signing
from queues.keyspace import entries, keys
from queues.producer import dedupe, inline, joining, limits, rates
from queues.producer.write import declared_queue, waiting_unique, write_job

if TYPE_CHECKING:
    from rq.job import Job

logger = logging.getLogger("queues.enqueueing")  # a documented logger name: kept when the module moved

# The keyword options of ``enqueue`` (queues/catalog/jobs.py keeps the list, so that ``@queues.job`` can
# refuse a job with a parameter of one of these names without importing Django or rq).
ENQUEUE_OPTIONS = catalog.ENQUEUE_OPTIONS


def func_path(func):
    """The dotted path of the declared job ``func`` (a function or its path); refuses anything else
    (queues/catalog/jobs.py), importing nothing."""
    if isinstance(func, str):
        path = func
    else:
        module = getattr(func, "__module__", None)
        qualname = getattr(func, "__qualname__", None)
        if not callable(func) or not module or not qualname or "<" in qualname:
            raise InvalidJob(
                f"func {func!r} is not a module-level function: workers import jobs by dotted path, "
                "so lambdas, nested functions and bound methods cannot be jobs. Move it to module level "
                "of the app's jobs.py and decorate it with @queues.job."
            )
        path = f"{module}.{qualname}"
    if not catalog.is_declared(path):
        raise InvalidJob(f"func {catalog.why_not(path)}")
    return path


def _check_json(value, where):
    """Refuse anything that JSON would not give back unchanged (Sidekiq's job_util rule)."""
    if value is None or isinstance(value, (bool, str, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJob(f"{where} is {value!r}, which JSON cannot carry. Pass a finite number or None.")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidJob(
                    f"{where} has a key {key!r} of type {type(key).__name__}; JSON object keys must be strings."
                    " Convert the keys with str()."
                )
            _check_json(item, f"{where}[{key!r}]")
        return
    hint = {
        "datetime": "pass value.isoformat() and parse it in the job",
        "date": "pass value.isoformat()",
        "Decimal": "pass str(value) and rebuild the Decimal in the job",
        "UUID": "pass str(value)",
        "set": "pass sorted(list(value))",
        "bytes": "pass a base64 string",
    }.get(type(value).__name__, "pass an id and load the object inside the job")
    raise InvalidJob(
        f"{where} is of type {type(value).__name__}, which is not JSON-serializable (jobs are stored as JSON): {hint}."
    )


def _check_args(args, kwargs):
    if not isinstance(args, (list, tuple)):
        raise InvalidJob(f"args must be a list or tuple, got {type(args).__name__} {args!r}.")
    if not isinstance(kwargs, dict):
        raise InvalidJob(f"kwargs must be a dict, got {type(kwargs).__name__} {kwargs!r}.")
    for i, value in enumerate(args):
        _check_json(value, f"argument {i} (positional)")
    for key, value in kwargs.items():
        _check_json(value, f"argument {key!r} (keyword)")


def _check_option(problems):
    if problems:
        p = problems[0]
        raise InvalidJob(f"{p.msg} {p.hint}")


def _resolve_when(delay, at):
    """-> aware UTC datetime for a delayed job, or None for an immediate one."""
    if delay is not None and at is not None:
        raise InvalidJob(f"Give delay or at, not both (got delay={delay!r}, at={at!r}).")
    if delay is not None:
        if isinstance(delay, dt.timedelta):
            seconds = delay.total_seconds()
        elif isinstance(delay, (int, float)) and not isinstance(delay, bool):
            seconds = float(delay)
        else:
            raise InvalidJob(f"delay must be seconds (a number) or a timedelta, got {type(delay).__name__} {delay!r}.")
        if seconds < 0 or not math.isfinite(seconds):
            raise InvalidJob(f"delay must be >= 0 seconds, got {delay!r}.")
        if seconds == 0:
            return None
        return _earliest(timezone.now() + dt.timedelta(seconds=seconds))
    if at is not None:
        if not isinstance(at, dt.datetime):
            raise InvalidJob(f"at must be a datetime, got {type(at).__name__} {at!r}.")
        if timezone.is_naive(at):
            raise InvalidJob(
                f"at={at!r} is a naive datetime; pass an aware one (e.g. django.utils.timezone.now() + "
                "timedelta(...)) so the time is not guessed."
            )
        return _earliest(at.astimezone(dt.UTC))


def _earliest(when):
    """``when`` rounded up to a whole second: the earliest time the job may start, never a moment before.
    The scheduled registry holds whole seconds (rq's ``ScheduledJobRegistry.schedule`` truncates) and RQ's
    scheduler moves a job once its second has begun: a job due at 12.3 s scored 12 could start at 12.0."""
    if when.microsecond:
        when = when.replace(microsecond=0) + dt.timedelta(seconds=1)
    return when
    return None


def enqueue(
    name: str,
    func: Callable[..., Any] | str,
    *args: Any,
    attempts: int | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    delay: float | dt.timedelta | None = None,
    at: dt.datetime | None = None,
    unique: str | bool | None = None,
    durable: bool = False,
    limit_key: str | None = None,
    limit_concurrency: int | None = None,
    limit_rate: str | None = None,
    priority: int = 0,
    max_run_seconds: float | None = None,
    debounce_key: str | None = None,
    debounce_seconds: float | None = None,
    debounce_max_seconds: float | None = None,
    throttle_key: str | None = None,
    throttle_seconds: float | None = None,
    **kwargs: Any,
) -> "Job":
    """Enqueue ``func(*args, **kwargs)`` on the declared queue ``name``; returns the rq Job (``.id``).

    The keyword-only parameters are options, not job arguments (``ENQUEUE_OPTIONS``; docs/api.md).
    A job declared ``@queues.job(enqueue_call_only=True)`` (its parameters are named like options)
    is refused: enqueue it with ``enqueue_call``, which takes the job's arguments explicitly.
    """
    if catalog.enqueue_call_only(func):
        raise InvalidJob(
            f"func {func if isinstance(func, str) else _dotted(func)!r} is declared "
            "@queues.job(enqueue_call_only=True): its parameters are named like enqueue options, so "
            f"queues.enqueue cannot tell them apart. Use queues.enqueue_call({name!r}, func, args=[...], "
            "kwargs={...}, <options>)."
        )
    return _enqueue(
        name,
        func,
        args,
        kwargs,
        attempts=attempts,
        timeout=timeout,
        job_id=job_id,
        delay=delay,
        at=at,
        unique=unique,
        meta=None,
        durable=durable,
        limit_key=limit_key,
        limit_concurrency=limit_concurrency,
        limit_rate=limit_rate,
        priority=priority,
        max_run_seconds=max_run_seconds,
        dedupe_options=dict(  # validated with the other options in _enqueue (queues/producer/dedupe.py)
            debounce_key=debounce_key,
            debounce_seconds=debounce_seconds,
            debounce_max_seconds=debounce_max_seconds,
            throttle_key=throttle_key,
            throttle_seconds=throttle_seconds,
        ),
    )


def _dotted(func):
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"


def enqueue_call(
    name: str,
    func: Callable[..., Any] | str,
    args: tuple[Any, ...] | list[Any] = (),
    kwargs: dict[str, Any] | None = None,
    *,
    attempts: int | None = None,
    timeout: float | None = None,
    job_id: str | None = None,
    delay: float | dt.timedelta | None = None,
    at: dt.datetime | None = None,
    unique: str | bool | None = None,
    meta: dict[str, Any] | None = None,
    durable: bool = False,
    limit_key: str | None = None,
    limit_concurrency: int | None = None,
    limit_rate: str | None = None,
    priority: int = 0,
    max_run_seconds: float | None = None,
    debounce_key: str | None = None,
    debounce_seconds: float | None = None,
    debounce_max_seconds: float | None = None,
    throttle_key: str | None = None,
    throttle_seconds: float | None = None,
) -> "Job":
    """Like ``enqueue`` with the job's arguments passed explicitly, so no name is reserved.
    ``meta`` may not hold a key the app owns (``check_meta_keys``)."""
    check_meta_keys(meta, "meta")
    return _enqueue(
        name,
        func,
        args,
        {} if kwargs is None else kwargs,
        attempts=attempts,
        timeout=timeout,
        job_id=job_id,
        delay=delay,
        at=at,
        unique=unique,
        meta=meta,
        durable=durable,
        limit_key=limit_key,
        limit_concurrency=limit_concurrency,
        limit_rate=limit_rate,
        priority=priority,
        max_run_seconds=max_run_seconds,
        dedupe_options=dict(  # validated with the other options in _enqueue (queues/producer/dedupe.py)
            debounce_key=debounce_key,
            debounce_seconds=debounce_seconds,
            debounce_max_seconds=debounce_max_seconds,
            throttle_key=throttle_key,
            throttle_seconds=throttle_seconds,
        ),
    )


def check_meta_keys(meta: object, where: str) -> None:
    """Refuse a ``meta`` (of the public API: ``enqueue_call``, ``enqueue_many``) that holds a key the
    app owns (``jobmeta.APP_OWNED``): the app would take the caller's value for its own marker."""
    owned = sorted(key for key in meta if key in jobmeta.APP_OWNED) if isinstance(meta, dict) else []
    if owned:
        key = owned[0]
        raise InvalidJob(
            f"{where} has the key {key!r}, which the app owns and writes itself (queues/jobs/meta.py): "
            "a job carrying it would be taken for what the app marks with it (a Task, a periodic run, "
            f"a retry, ...). Rename the key (e.g. {'my_' + key!r}); to record who asked, pass "
            "meta=queues.owner_meta(...)."
        )


# The options of ``enqueue_call`` and their defaults (``enqueue_call_as_app``).
_CALL_OPTIONS: dict[str, Any] = {
    "attempts": None,
    "timeout": None,
    "job_id": None,
    "delay": None,
    "at": None,
    "unique": None,
    "meta": None,
    "durable": False,
    "limit_key": None,
    "limit_concurrency": None,
    "limit_rate": None,
    "priority": 0,
    "max_run_seconds": None,
}


def enqueue_call_as_app(
    name: str,
    func: Callable[..., Any] | str,
    args: tuple[Any, ...] | list[Any] = (),
    kwargs: dict[str, Any] | None = None,
    **options: Any,
) -> "Job":
    """``enqueue_call`` for the app's own callers (periodic runs, the Tasks backend), whose ``meta``
    carries keys the app owns (``schedule``, ``task``): not part of the public API."""
    unknown = sorted(set(options) - set(_CALL_OPTIONS))
    if unknown:
        raise TypeError(f"enqueue_call_as_app() got unknown options {unknown}")
    return _enqueue(name, func, args, {} if kwargs is None else kwargs, **{**_CALL_OPTIONS, **options})


def enqueue_fail_fast(
    name, func, args=(), kwargs=None, *, meta=None, limit_key=None, limit_concurrency=None, priority=0
):
    """``enqueue_call`` that never goes through the outbox: written now, or at the commit of the
    caller's transaction where a Redis failure raises (``QueueUnavailable``) instead of waiting in
    the outbox. For the admin's retry of a dead letter, whose row must say "retried" only once the
    job is in Redis (docs/api.md, "The outbox")."""
    return _enqueue(
        name,
        func,
        args,
        {} if kwargs is None else kwargs,
        attempts=None,
        timeout=None,
        job_id=None,
        delay=None,
        at=None,
        unique=None,
        meta=meta,
        durable=False,
        limit_key=limit_key,
        limit_concurrency=limit_concurrency,
        priority=priority,
        fail_fast=True,
    )


def _enqueue(
    name,
    func,
    args,
    kwargs,
    *,
    attempts,
    timeout,
    job_id,
    delay,
    at,
    unique,
    meta,
    durable,
    limit_key,
    limit_concurrency,
    priority=0,
    fail_fast=False,
    max_run_seconds=None,
    dedupe_options=None,  # debounce_*/throttle_* options (queues/producer/dedupe.py)
    limit_rate=None,
):
    config = get_config(name)
    path = func_path(func)
    _check_args(args, kwargs)
    if attempts is None and timeout is None:
        options = config.options  # read only below
    else:
        overrides = {k: v for k, v in (("attempts", attempts), ("timeout", timeout)) if v is not None}
        _check_option(conf.validate_job_options(f"enqueue({name!r}, ...)", overrides))
        options = {**config.options, **overrides}
    when = None if delay is None and at is None else _resolve_when(delay, at)
    if job_id is not None:
        _check_job_id(job_id)
    if unique is not None and unique is not False:
        if unique is True:
            if job_id is None:
                raise InvalidJob("unique=True needs a job_id: pass unique='<key>' or job_id='<id>'.")
            unique = job_id
        if not isinstance(unique, str) or not unique:
            raise InvalidJob(f"unique must be a non-empty string key (e.g. 'cabinet-42'), got {unique!r}.")
    if durable is not True and durable is not False:
        raise InvalidJob(f"durable must be True or False, got {durable!r}.")
    rate = rates.checked(limit_key, limit_rate, priority=priority)  # queues/producer/rates.py
    limit = _check_limit(name, config, limit_key, limit_concurrency, rated=rate is not None)
    _check_priority(priority, limit)
    check_max_run_seconds(max_run_seconds)
    if meta is not None:
        _check_json(meta, "meta")
    plan = (
        dedupe.check(**dedupe_options, unique=unique, when=when, durable=durable, job_id=job_id, limit_key=limit_key)
        if dedupe_options
        else None
    )
    if plan is not None and plan.mode == "debounce":
        when = _earliest(timezone.now() + dt.timedelta(seconds=plan.seconds))

    queue = declared_queue(name, config)
    if max_run_seconds is None:  # per enqueue, then the queue's option (conf.JOB_DEFAULTS)
        max_run_seconds = options.get("max_run_seconds")
    job_meta = jobmeta.for_enqueue(
        meta, queue=name, attempts=options["attempts"], priority=priority, max_run_seconds=max_run_seconds
    )
    batch = joining.current()  # inside queues.batch(): the job is a member (queues/producer/joining.py)
    if batch is not None:
        joining.check_member(name, config.server)
        job_meta[jobmeta.BATCH] = batch.id
    job = queue.create_job(
        path,
        args=list(args),
        kwargs=kwargs,
        timeout=options["timeout"],
        result_ttl=options["result_ttl"],
        failure_ttl=options["failure_ttl"],
        job_id=job_id or _new_job_id(),
        meta=job_meta,
    )
    _apply_limit(job, limit)
    rates.apply(job, limit_key, rate)
    job.signature = signing.sign(job)  # builds job.data once; save() reuses it
    check_size(job, f"queues.enqueue({name!r}, {path!r}, ...)")
    with _sending_span(name, job):
        if plan is not None:  # a debounce or throttle key: one Lua call (queues/producer/dedupe.py)
            placed = inline.run(job) if testing.inline_on() else dedupe.place(queue, job, when, plan)
        else:
            placed = _place(
                queue,
                job,
                when,
                name=name,
                unique=unique,
                explicit_id=job_id is not None,
                fail_fast=fail_fast,
                durable=durable,
            )
    if batch is not None and placed is job and not testing.inline_on():
        batch.joined([job.id])  # a unique key's waiting job (another one) is not a member
    return placed


def _sending_span(name, job):
    """The PRODUCER span ``send <queue>`` when tracing is on (the job carries its context: queues/tracing/),
    else nothing."""
    if not tracing.on:
        return contextlib.nullcontext()
    from queues.tracing import spans  # imports OpenTelemetry: only when tracing is on

    return spans.sending(name, [job])


def _place(queue, job, when, *, name, unique, explicit_id, fail_fast, durable):
    """Write the built, signed ``job``: now, at the commit, or through the outbox; -> the Job (the
    waiting one of its ``unique`` key, when there is one)."""
    if testing.inline_on():  # queues.testing.inline(): run now, write nothing
        return inline.run(job)
    lock_key = keys.unique_key(name, unique) if unique else None

    if unique:
        existing = waiting_unique(queue, lock_key)
        if existing is not None:
            return existing

    if fail_fast and _in_transaction():
        # Written at the commit, a Redis failure raising there (the caller's other commit
        # callbacks after it do not run): how the admin's retry of a dead letter marks its row
        # retried only once the job is in Redis (failures/operations.py).
        transaction.on_commit(lambda: write_job(queue, job, when, explicit_id=explicit_id, lock_key=lock_key))
        return job
    if not fail_fast and (durable or _in_transaction()):
        # Through the outbox (queues/producer/outbox.py): a row in this transaction, pushed after the commit,
        # or by a relay if the push fails or the process dies first.
        from queues.producer import outbox

        outbox.stage(queue, job, when, explicit_id=explicit_id, lock_key=lock_key)
        return job
    duplicate_of = write_job(queue, job, when, explicit_id=explicit_id, lock_key=lock_key)
    if duplicate_of is not None:  # lost a race with a concurrent enqueue of the same key
        try:
            return queue.fetch_job(duplicate_of) or job
        except redis.RedisError as exc:
            raise unavailable(exc, connection=queue.connection) from exc
    return job


MAX_JOB_ID = 200  # characters of an own job_id


def _check_job_id(job_id):
    """An own ``job_id``: rq's rule (``rq.job.JOB_ID_PATTERN``: it becomes part of Redis key names),
    checked here so that the caller gets ``InvalidJob`` naming the value, never rq's bare ValueError."""
    why = None
    if not isinstance(job_id, str):
        why = f"it is {type(job_id).__name__}"
    elif not job_id:
        why = "it is empty"
    elif len(job_id) > MAX_JOB_ID:
        why = f"it has {len(job_id)} characters"
    elif not JOB_ID_PATTERN.fullmatch(job_id):
        bad = next(ch for ch in job_id if not JOB_ID_PATTERN.fullmatch(ch))
        why = f"{bad!r} is not allowed"
    if why is not None:
        raise InvalidJob(
            f"job_id must be a non-empty string of letters, digits, '_' and '-' (at most {MAX_JOB_ID} characters), "
            f"got {job_id!r:.120}: {why}. Pass e.g. job_id='order-42', or leave job_id out for a generated one."
        )


def _check_limit(name, config, limit_key, limit_concurrency, rated=False):
    """Validate the fairness options: ``(limit_key, concurrency)``, or None when the job has no
    limit. The concurrency defaults to the queue option ``limit_concurrency`` (queues/producer/limits.py)."""
    if limit_key is None and limit_concurrency is None:
        return None
    if limit_key is None:
        raise InvalidJob(
            f"limit_concurrency={limit_concurrency!r} without a limit_key: the concurrency limits the jobs "
            "sharing a key. Pass limit_key='<key>' too (e.g. limit_key='seller:42'), or drop limit_concurrency."
        )
    problem = limits.key_problem(limit_key)
    if problem:
        raise InvalidJob(
            f"limit_key={limit_key!r} {problem}. Pass a short key naming who the jobs are for, "
            "e.g. limit_key='seller:42'."
        )
    if limit_concurrency is None:
        limit_concurrency = config.options.get("limit_concurrency")
        if limit_concurrency is None:
            if rated:
                return None  # a rate alone: no concurrency limit (queues/producer/rates.py)
            raise InvalidJob(
                f"limit_key={limit_key!r} without a limit_concurrency, and queue {name!r} has no "
                "limit_concurrency option. Pass limit_concurrency=<n> (an integer >= 1), or declare "
                f"QUEUES = {{{name!r}: {{'limit_concurrency': <n>}}}}."
            )
    elif not isinstance(limit_concurrency, int) or isinstance(limit_concurrency, bool) or limit_concurrency < 1:
        raise InvalidJob(
            f"limit_concurrency must be an integer >= 1 (jobs of the key queued or running at once), got "
            f"{limit_concurrency!r}. Pass e.g. limit_concurrency=2, or leave it out for the queue's option."
        )
    return limit_key, limit_concurrency


def _check_priority(priority, limit):
    """``priority``: an int; > 0 the queue's high band, 0 normal, < 0 low (queues/catalog/classes.py)."""
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise InvalidJob(
            f"priority must be an integer (> 0: high band, 0: normal, < 0: low band), got "
            f"{type(priority).__name__} {priority!r}. Pass e.g. priority=10, priority=-10, or leave it out."
        )
    if priority and limit is not None:
        # rq's promotion of a held job (its Lua) pushes onto the queue's own list: the band would be lost.
        raise InvalidJob(
            f"priority={priority!r} with limit_key={limit[0]!r}: a job held by its limit key is pushed to the "
            "normal band when its turn comes, so the two cannot be combined. Drop priority, or limit_key."
        )


def check_max_run_seconds(value):
    """``max_run_seconds`` (issue 34): None, or a finite number of seconds > 0 after which a long job pauses at
    its next checkpoint (queues/jobs/resume.py)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value == float("inf"):
        raise InvalidJob(
            f"max_run_seconds must be a number of seconds > 0 (a long job pauses at its next checkpoint past it), "
            f"got {type(value).__name__} {value!r}. Pass e.g. max_run_seconds=600, or leave it out (no limit)."
        )
    if value <= 0:
        raise InvalidJob(
            f"max_run_seconds must be > 0, got {value!r}: a job paused at every checkpoint would never end. "
            "Pass e.g. max_run_seconds=600, or leave it out (no limit)."
        )


def check_size(job, where):
    """Refuse a job larger than a worker runs (``entries.RUN_BYTES``, ``entries.too_large``): its ``data`` (built by
    ``signing.sign``) is its function and arguments as stored, uncompressed. ``where``: the call, for the message."""
    size = len(job.data)
    if size > entries.RUN_BYTES:
        raise InvalidJob(
            f"{where}: the job's function and arguments serialize to "
            f"{size} bytes, more than {entries.RUN_BYTES} (16 MiB), the largest job a worker runs. Keep the data "
            "in the database or a file store and pass its id (or a page of ids) as the argument."
        )


def _apply_limit(job, limit):
    """Record ``limit`` (from ``_check_limit``) on ``job`` before it is signed and written: rq's
    rate-limit fields, the key scoped to the job's queue. They are stored in the job hash, so a job
    the outbox restores from its row keeps them."""
    if limit is None:
        return
    limit_key, concurrency = limit
    job.rate_limit_key = limits.scoped(job.origin, limit_key)
    job.rate_limit_concurrency = concurrency


def _new_job_id():
    """``uuid.uuid4().hex`` (32 hex digits, version 4), in a third of its time."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # RFC 4122 variant
    return raw.hex()


def _in_transaction(using=DEFAULT_DB_ALIAS):
    return connections[using].in_atomic_block
