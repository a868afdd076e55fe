"""A Redis key of the wrong type, met inside rq's or rq-scheduler's own code: renamed aside, never fatal.

Whoever can write to the queues' Redis can turn any key into another type (``SET <p>:workers
poison``). This project's own reads check what they get; rq's and rq-scheduler's cannot be changed,
and raise ``WRONGTYPE`` (or a ``ValueError`` on a bad number) out of a worker's registration, its
maintenance, a scheduler's move of due jobs or a limit key's release. Each such entry point runs
inside a boundary from here:

``retry_once(connection, expected, call, who=...)``
    ``call()``; on a wrong type, every key of ``expected()`` (``{key: type}``, computed only then)
    that holds another type is renamed to ``<key>.corrupt-<unix time>`` (kept for investigation,
    the same name ``worker/dequeue.py`` gives a queue list) with one ERROR naming it (``repeats``: the
    same key set aside again and again is one line a minute with a count), and ``call()``
    runs once more. Given ``members=`` (a callable naming sets rq reads as text), a member that is not
    UTF-8 (``UnicodeDecodeError``) is moved to the set ``<key>.corrupt-<unix time>`` the same way.
    Anything else is raised, as before: the caller decides.
``contain(connection, expected, call, who=..., what=...)``
    ``retry_once``, and whatever still fails (but a lost connection: the callers wait those out) is
    reported once per process (``entries.report``: ERROR, masked, control characters escaped) and
    skipped: None.
``settle(connection, expected, exc, who=..., what=...)``
    the same for an error the caller caught itself, without trying again.

The tables of what each entry point touches (``registration``, ``maintenance``, ``scheduler``,
``limit``, ``flush``, ``starting``, ``running``, ``worker_sets``) name rq's keys with rq's own templates, as
``keys.py`` does.
"""

import time
import traceback
import uuid
from pathlib import Path

import redis
from rq.group import Group
from rq.registry import ReadyJobRegistry
from rq.utils import as_text
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues import logsafe
from queues.connection.outage import REDIS_ERRORS
from queues.keyspace import entries, keys, repeats

logger = logsafe.get_logger("queues.resilience")  # the logger dequeue.py and abandoned.py set keys aside with

DUE_MEMBERS = 100  # due members of a scheduled registry whose job hashes are checked too


def is_wrong_type(exc):
    return isinstance(exc, redis.ResponseError) and "WRONGTYPE" in str(exc)


def set_aside(connection, expected, *, who, log=logger):
    """Rename each key of ``expected`` ({key: Redis type}) that holds another type (one pipelined TYPE
    for all, then a RENAMENX each); -> the keys renamed. A key that is gone is fine."""
    names = list(expected)
    if not names:
        return []
    with connection.pipeline(transaction=False) as pipe:
        for key in names:
            pipe.type(key)
        found = pipe.execute()
    renamed = []
    for key, kind in zip(names, found):
        kind = as_text(kind)
        if kind in (expected[key], "none"):
            continue
        aside = f"{key}.corrupt-{int(time.time())}"
        try:
            if not connection.renamenx(key, aside):  # one already set aside this second: keep both
                aside = f"{aside}-{uuid.uuid4().hex[:6]}"
                connection.rename(key, aside)
        except redis.ResponseError:  # gone meanwhile ("no such key"): nothing to set aside
            continue
        repeats.report(
            repeats.WRONG_TYPE,
            key,
            "%s: %s is a %s, not a %s: renamed to %s and left for investigation",
            who,
            key,
            kind,
            expected[key],
            aside,
            log=log,
            connection=connection,
        )
        renamed.append(key)
    return renamed


def set_aside_members(connection, set_keys, *, who, log=logger):
    """Move each member that is not UTF-8 of the sets ``set_keys`` (rq reads their members as text) to
    ``<key>.corrupt-<unix time>``, with one ERROR each; -> the members moved. A key that is no set is fine."""
    moved = []
    for key in set_keys:
        try:
            members = connection.smembers(key)
        except redis.ResponseError:
            continue
        for member in members:
            try:
                as_text(member)
            except UnicodeDecodeError:
                aside = f"{key}.corrupt-{int(time.time())}"
                if connection.smove(key, aside, member):
                    repeats.report(
                        repeats.NOT_UTF8,
                        key,
                        "%s: member %r of %s is not UTF-8: moved to %s and left for investigation",
                        who,
                        member[:200],
                        key,
                        aside,
                        log=log,
                        connection=connection,
                    )
                    moved.append(member)
    return moved


def retry_once(connection, expected, call, *, who, log=logger, again=None, members=None):
    """``call()``; on WRONGTYPE, the keys of ``expected()`` of another type set aside and ``call()`` once
    more (``again()`` first, when given: undo what the failed MULTI did apply); on a member rq cannot
    read as text (``UnicodeDecodeError``), the members of the sets ``members()`` that are not UTF-8 set
    aside, then once more. Raises what ``call()`` raises otherwise (also when nothing could be named)."""
    try:
        return call()
    except redis.ResponseError as exc:
        if not is_wrong_type(exc) or not set_aside(connection, expected(), who=who, log=log):
            raise
    except UnicodeDecodeError:
        if members is None or not set_aside_members(connection, members(), who=who, log=log):
            raise
    if again is not None:
        again()
    return call()


def contain(connection, expected, call, *, who, what, log=logger):
    """``retry_once``; what still fails is reported once and skipped (None). A lost connection is raised."""
    try:
        return retry_once(connection, expected, call, who=who, log=log)
    except REDIS_ERRORS:
        raise
    except Exception as exc:  # noqa: BLE001 — an entry rq cannot read must not end the process
        report(exc, who=who, what=what, log=log)
        return None


def settle(connection, expected, exc, *, who, what, log=logger):
    """For an error already caught (``exc``): the keys of ``expected()`` of another type set aside, or,
    when that names none, ``report``. Nothing is tried again: the caller's next run does."""
    if not (is_wrong_type(exc) and set_aside(connection, expected(), who=who, log=log)):
        report(exc, who=who, what=what, log=log)


def report(exc, *, who, what, log=logger):
    """One ERROR per distinct failure and process (``entries.report``: masked, escaped), naming where
    in rq's code it was raised: the same bad entry met at every tick is not a new line every tick."""

    frames = traceback.extract_tb(exc.__traceback__)
    where = f", raised at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    entries.report(who, f"could not {what} ({type(exc).__name__}: {exc}{where})", log=log)


# -- what rq's entry points touch: {key: Redis type} -------------------------------------------------
def registration(worker):
    """rq's ``register_birth`` / ``register_death`` and our re-registration (housekeeping.py)."""

    expected = {worker.redis_workers_keys: "set", worker.key: "hash"}
    expected.update({WORKERS_BY_QUEUE_KEY % name: "set" for name in worker.queue_names()})
    return expected


def flush(worker):
    """A worker's heartbeat pipeline: its hash, and per queue the metrics and the finished registry
    (``worker/housekeeping.py``)."""

    expected = {worker.key: "hash"}
    for name in worker.queue_names():
        expected.update(
            {keys.metrics_key(name): "hash", keys.durations_key(name): "list", keys.finished_key(name): "zset"}
        )
    return expected


def starting(worker, job):
    """The MULTI that records a job as started (``worker/attempt.py``: rq's ``Execution.create``)."""

    return {
        worker.key: "hash",
        keys.worker_executions_key(worker.name): "set",
        keys.started_key(job.origin): "zset",
        keys.intermediate_key(keys.queue_key(job.origin)): "list",
    }


def running(worker, job, execution):
    """rq's ``maintain_heartbeats`` of a running job: the worker's hash, the job's, the started registry and,
    written with RQ_EXECUTION_RECORDS, its execution's (``queues/jobs/execution.py``)."""

    expected = {
        worker.key: "hash",
        job.key: "hash",
        keys.started_key(job.origin): "zset",
    }
    if getattr(execution, "rq_records", True):
        expected[execution.key] = "hash"
    return expected


def limit(scoped_key):
    """rq's three keys of one limit key (``queues.producer.limits``)."""

    return {
        keys.limit_config_key(scoped_key): "hash",
        keys.limit_allowed_key(scoped_key): "zset",
        keys.limit_held_key(scoped_key): "zset",
    }


def limits_in_use(connection):
    """rq's set of the limit keys in use, and the keys of each member of it that is text."""

    expected = {keys.limit_keys_key(): "set"}
    if as_text(connection.type(keys.limit_keys_key())) == "set":
        for member in connection.smembers(keys.limit_keys_key()):
            try:
                expected.update(limit(as_text(member)))
            except UnicodeDecodeError:
                continue
    return expected


def worker_sets(queues, workers_key):
    """rq's sets of worker keys (all, and per queue of ``queues``) that its maintenance reads as text."""

    return [workers_key, *(WORKERS_BY_QUEUE_KEY % queue.name for queue in queues)]


def maintenance(connection, queues, workers_key):
    """rq's ``clean_registries`` and ``clean_group_registries`` over ``queues`` (rq Queue objects)."""

    expected = {workers_key: "set", Group.REDIS_GROUP_KEY: "set"}
    for queue in queues:
        expected.update(
            {
                **dict.fromkeys(keys.band_keys(queue.key), "list"),
                keys.intermediate_key(queue.key): "list",
                keys.started_key(queue.name): "zset",
                keys.finished_key(queue.name): "zset",
                keys.failed_key(queue.name): "zset",
                queue.deferred_job_registry.key: "zset",
                ReadyJobRegistry.key_template.format(queue.name): "zset",
                WORKERS_BY_QUEUE_KEY % queue.name: "set",
            }
        )
    expected.update(limits_in_use(connection))
    return expected


def scheduler(connection, queue_names, scheduler_key=None):
    """RQ's scheduler moving due jobs of ``queue_names``: their scheduled registries, the hashes of the
    first due jobs, their queues, and the scheduler's own hash."""

    expected = {} if scheduler_key is None else {scheduler_key: "hash"}
    for name in queue_names:
        registry = keys.scheduled_key(name)
        expected.update({registry: "zset", **dict.fromkeys(keys.band_keys(keys.queue_key(name)), "list")})
        if as_text(connection.type(registry)) == "zset":
            for member in connection.zrangebyscore(registry, 0, time.time(), start=0, num=DUE_MEMBERS):
                try:
                    expected[keys.job_key(as_text(member))] = "hash"
                except UnicodeDecodeError:
                    continue
    expected.update(limits_in_use(connection))
    return expected
