"""The panel's readers of the worker sets and hashes and of rq-scheduler's sorted set: never a 500 or a
503 for what an entry holds.

rq reads ``<p>:workers`` and ``<p>:workers:<queue>`` with SMEMBERS and each worker's hash with
HGETALL, and raises (``WRONGTYPE``, ``UnicodeDecodeError``, ``ValueError`` on a bad date) at the
first entry it cannot read; the panel's guard then answered 503 "Redis did not answer in time" for
the dashboard, ``stats.json``, the queue page, the workers page and django-rq's ``metrics``.
rq-scheduler's ``count`` and ``get_jobs`` do the same with its sorted set (a key of the wrong
type, an absurd score) and fetch each job with rq. Here:

| what Redis holds                                  | what the panel shows                                 |
| ------------------------------------------------- | ---------------------------------------------------- |
| a worker set that is not a set                    | no workers (the key reported once: ``entries``)      |
| a member that is not UTF-8 or not a worker key    | left out, reported                                   |
| a worker hash that is gone                        | left out (nothing written: rq would SREM it)         |
| a worker hash rq cannot read (wrong type, bytes,  | left out, reported; its page answers 404             |
| a queue list over ``WORKER_QUEUES_BYTES``)        |                                                      |
| a worker's current job that is poison             | read through ``jobread``: shown as corrupt           |
| rq-scheduler's set that is not a sorted set       | 0 jobs, reported                                     |
| a scheduled entry with an absurd score (inf, NaN) | left out, reported                                   |
| a scheduled job that is poison                    | read through ``jobread``: shown as corrupt           |

Nothing here writes.
"""

import datetime as dt
import math

import redis
from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE
from rq.serializers import JSONSerializer
from rq.utils import utcparse
from rq.worker import Worker
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues import rqcompat
from queues.catalog.lookup import OptimaJob, OptimaQueue
from queues.jobs import read as jobread
from queues.keyspace import entries


def members(connection, key):
    """The members of the set ``key`` as text; a key of the wrong type reads as empty, a member that
    is not UTF-8 is left out (both reported)."""
    try:
        raw = connection.smembers(key)
    except redis.ResponseError as exc:
        raw = exc
    return members_of(key, raw)


def members_of(key, raw):
    """``members`` from an SMEMBERS reply (a set, or the error a pipeline returned for it)."""
    if isinstance(raw, redis.ResponseError):
        if "WRONGTYPE" not in str(raw):
            raise raw
        entries.report(key, "not a set (WRONGTYPE): read as empty")
        return []
    if isinstance(raw, Exception):
        raise raw
    found = []
    for member in raw:
        try:
            found.append(member.decode("utf-8") if isinstance(member, bytes) else member)
        except UnicodeDecodeError:
            entries.report(key, f"member {entries.text(member)!r} is not UTF-8: left out")
    return sorted(found)


def worker_keys(connection, queue=None):
    """The worker keys of ``queue`` (or of every queue), read by ``members``."""
    return members(connection, WORKERS_BY_QUEUE_KEY % queue.name if queue is not None else Worker.redis_workers_keys)


def worker_commands(pipe, worker_key):
    """Queue the reads of one worker in ``pipe`` (TYPE, HSTRLEN of its queue list, HGETALL, SMEMBERS of
    its executions): ``worker_reply`` reads their replies. Four commands, no round trip of its own."""
    pipe.type(worker_key)
    pipe.hstrlen(worker_key, "queues")
    pipe.hgetall(worker_key)
    pipe.smembers(WORKER_EXECUTIONS_KEY_TEMPLATE.format(worker_key[len(Worker.redis_worker_namespace_prefix) :]))


WORKER_COMMANDS = 4


def worker_reply(worker_key, replies):
    """``(fields, execution composite keys)`` of a worker from the replies of ``worker_commands``, or
    ``(None, [])`` for one that is gone (left out, nothing written) or that rq cannot read (reported).
    ``fields``: rq's worker attributes (name, key, hostname, ip_address, pid, version, python_version,
    state, last_heartbeat, birth_date, failed/successful_job_count, total_working_time, queue_names)."""
    kind, queues_length, raw, executions = replies
    for reply in replies:
        if isinstance(reply, (redis.ConnectionError, redis.TimeoutError)):
            raise reply
    if kind == b"none":
        return None, []  # gone: rq would SREM it from the set, a page writes nothing
    if kind != b"hash":
        entries.report(worker_key, f"a {entries.text(kind)}, not a worker's hash: left out")
        return None, []
    if isinstance(queues_length, int) and queues_length > entries.WORKER_QUEUES_BYTES:
        entries.report(worker_key, f"its queue list is over {entries.WORKER_QUEUES_BYTES} bytes: left out")
        return None, []
    try:
        if isinstance(raw, Exception):
            raise raw
        data = {k.decode("utf-8"): v.decode("utf-8") for k, v in raw.items()}
        fields = {
            "key": worker_key,
            "name": worker_key[len(Worker.redis_worker_namespace_prefix) :],
            "hostname": data.get("hostname") or None,
            "ip_address": data.get("ip_address") or None,
            "pid": int(data["pid"]) if data.get("pid") else None,
            "version": data.get("version") or "",
            "python_version": data.get("python_version") or "",
            "state": data.get("state", "?"),
            "last_heartbeat": utcparse(data["last_heartbeat"]) if data.get("last_heartbeat") else None,
            "birth_date": utcparse(data["birth"]) if data.get("birth") else None,
            "failed_job_count": int(data["failed_job_count"]) if data.get("failed_job_count") else 0,
            "successful_job_count": int(data["successful_job_count"]) if data.get("successful_job_count") else 0,
            "total_working_time": float(data["total_working_time"]) if data.get("total_working_time") else 0,
            "queue_names": data["queues"].split(",") if data.get("queues") else [],
        }
    except Exception as exc:  # noqa: BLE001 — whatever the hash holds, it is not a worker rq can read
        entries.report(worker_key, f"not a worker rq can read ({type(exc).__name__}): left out")
        return None, []
    if isinstance(executions, redis.ResponseError):
        entries.report(worker_key, f"its executions cannot be read ({executions})")
        executions = set()
    composite = sorted(m.decode("utf-8", "replace") for m in executions or ())
    return fields, composite


def read_workers(connection, worker_keys):
    """``[(fields, execution composite keys)]`` of ``worker_keys`` (``worker_reply``; unreadable or gone
    ones left out) in one round trip whatever their number."""
    checked = []
    for key in worker_keys:
        key = entries.text(key)
        if key.startswith(Worker.redis_worker_namespace_prefix):
            checked.append(key)
        else:
            entries.report(key, "not a worker key: left out")
    if not checked:
        return []
    with connection.pipeline(transaction=False) as pipe:
        for key in checked:
            worker_commands(pipe, key)
        replies = pipe.execute(raise_on_error=False)
    found = []
    for i, key in enumerate(checked):
        fields, executions = worker_reply(key, replies[i * WORKER_COMMANDS : (i + 1) * WORKER_COMMANDS])
        if fields is not None:
            found.append((fields, executions))
    return found


class JSONWorker(Worker):
    """rq's Worker as the panel reads it: JSON serializer and jobs whatever the caller passes, its sets
    and hashes read without raising or writing (the module's table), pipelined (``read_workers``)."""

    @classmethod
    def find_by_key(cls, worker_key, connection, job_class=None, queue_class=None, serializer=None):
        found = read_workers(connection, [worker_key])
        return cls.from_fields(found[0][0], connection) if found else None

    @classmethod
    def from_fields(cls, fields, connection):
        """The worker of ``readers.worker_reply``'s fields (no read)."""
        worker = cls(
            [],
            fields["name"],
            connection=connection,
            job_class=OptimaJob,
            queue_class=OptimaQueue,
            prepare_for_work=False,
            serializer=JSONSerializer,
        )
        for name in ("hostname", "ip_address", "pid", "version", "python_version", "last_heartbeat", "birth_date"):
            setattr(worker, name, fields[name])
        for name in ("failed_job_count", "successful_job_count", "total_working_time"):
            setattr(worker, name, fields[name])
        rqcompat.remember_state(worker, fields["state"])  # the state its hash holds (rq reads it as _state)
        worker.queues = [
            OptimaQueue(name, connection=connection, job_class=OptimaJob, serializer=JSONSerializer)
            for name in fields["queue_names"]
        ]
        return worker

    @classmethod
    def all(cls, connection=None, job_class=None, queue_class=None, queue=None, serializer=None):
        connection = queue.connection if queue is not None else connection
        return [
            cls.from_fields(fields, connection)
            for fields, _ in read_workers(connection, worker_keys(connection, queue))
        ]

    @classmethod
    def all_keys(cls, connection=None, queue=None):
        return worker_keys(queue.connection if queue is not None else connection, queue)

    @classmethod
    def count(cls, connection=None, queue=None):
        return len(worker_keys(queue.connection if queue is not None else connection, queue))

    def get_current_job(self):
        """The job of one of its executions, read through ``jobread`` (a poison one shown as corrupt)."""
        try:
            execution = self.execution
        except (redis.ConnectionError, redis.TimeoutError):
            raise
        except Exception as exc:  # noqa: BLE001 — its executions cannot be read: no current job shown
            entries.report(self.key, f"its executions cannot be read ({type(exc).__name__})")
            return None
        return jobread.fetch(execution.job_id, self.connection) if execution else None


def read_only_scheduler(scheduler):
    """rq-scheduler's ``scheduler`` with ``count``, ``get_jobs`` and ``cancel`` of the module's table."""

    def count(until=None):
        try:
            return scheduler.connection.zcard(scheduler.scheduled_jobs_key)
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            entries.report(scheduler.scheduled_jobs_key, "not a sorted set (WRONGTYPE): read as empty")
            return 0

    def get_jobs(until=None, with_times=False, offset=None, length=None):
        key = scheduler.scheduled_jobs_key
        if not count():
            return []
        start = offset or 0
        end = start + length - 1 if length else -1
        pairs = []
        for member, score in scheduler.connection.zrange(key, start, end, withscores=True):
            if not math.isfinite(score) or not 0 <= score < 2**40:
                entries.report(key, f"member {entries.text(member)!r} has the score {score}, not a time: left out")
                continue
            pairs.append((member, dt.datetime.fromtimestamp(score, dt.UTC).replace(tzinfo=None)))
        jobs = jobread.fetch_many([m for m, _ in pairs], scheduler.connection, check_origin=False)
        found = [(job, at) for job, (_, at) in zip(jobs, pairs) if job is not None]
        return found if with_times else [job for job, _ in found]

    scheduler.count = count
    scheduler.get_jobs = get_jobs
    scheduler.cancel = lambda *args, **kwargs: None  # get_jobs() cancels missing ids: not on a page
    return scheduler
