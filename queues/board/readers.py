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
from rq.serializers import JSONSerializer
from rq.worker import Worker
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues.catalog.lookup import OptimaJob, OptimaQueue
from queues.jobs import read as jobread
from queues.keyspace import entries


def members(connection, key):
    """The members of the set ``key`` as text; a key of the wrong type reads as empty, a member that
    is not UTF-8 is left out (both reported)."""
    try:
        raw = connection.smembers(key)
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        entries.report(key, "not a set (WRONGTYPE): read as empty")
        return []
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


class JSONWorker(Worker):
    """rq's Worker as the panel reads it: JSON serializer and jobs whatever the caller passes, its sets
    and hashes read without raising or writing (the module's table)."""

    @classmethod
    def find_by_key(cls, worker_key, connection, job_class=None, queue_class=None, serializer=None):
        worker_key = entries.text(worker_key)
        if not worker_key.startswith(cls.redis_worker_namespace_prefix):
            entries.report(worker_key, "not a worker key: left out")
            return None
        try:
            kind = connection.type(worker_key)
            if kind == b"none":
                return None  # gone: rq would SREM it from the set, a page writes nothing
            if kind != b"hash":
                entries.report(worker_key, f"a {entries.text(kind)}, not a worker's hash: left out")
                return None
            if connection.hstrlen(worker_key, "queues") > entries.WORKER_QUEUES_BYTES:  # rq builds a queue per name
                entries.report(worker_key, f"its queue list is over {entries.WORKER_QUEUES_BYTES} bytes: left out")
                return None
            return super().find_by_key(
                worker_key, connection, job_class=OptimaJob, queue_class=OptimaQueue, serializer=JSONSerializer
            )
        except (redis.ConnectionError, redis.TimeoutError):
            raise
        except Exception as exc:  # noqa: BLE001 — whatever the hash holds, it is not a worker rq can read
            entries.report(worker_key, f"not a worker rq can read ({type(exc).__name__}): left out")
            return None

    @classmethod
    def all(cls, connection=None, job_class=None, queue_class=None, queue=None, serializer=None):
        connection = queue.connection if queue is not None else connection
        found = (cls.find_by_key(key, connection) for key in worker_keys(connection, queue))
        return [worker for worker in found if worker is not None]

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
