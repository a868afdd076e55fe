"""The rq classes of this app: JSON jobs that import only declared functions, and queues bound to them.

Settings name them as ``queues.registry.OptimaJob`` / ``queues.registry.OptimaQueue`` (that module
re-exports them for users' settings).
"""

import asyncio
import datetime as dt
from typing import Any

from rq import Queue
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus, parse_job_id
from rq.results import Result
from rq.serializers import JSONSerializer
from rq.utils import as_text, str_to_date

from queues import rqcompat
from queues.catalog import jobs as catalog
from queues.catalog.queues import get_config
from queues.exceptions import NotAJob
from queues.jobs import coroutines, stream
from queues.jobs import meta as jobmeta
from queues.keyspace import entries, keys

DATE_FIELDS = ("created_at", "enqueued_at", "started_at", "ended_at", "last_heartbeat")


def parse_date(value: bytes | str) -> dt.datetime:
    """rq's ``str_to_date`` of a date field of a job's hash (aware, UTC), without its ``strptime`` for the one form
    rq writes (``2026-12-06T17:00:00.123456Z``): 6.6 µs a field through ``strptime``, 0.4 through
    ``fromisoformat`` (``timeit``), two to five fields each time a job is read (the worker reads each job it pops:
    issue 36). Any other text, a malformed one included, goes to rq's parse, which decides as before."""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    if len(text) == 27 and text[10] == "T" and text[19] == "." and text[26] == "Z" and text[:26].isascii():
        try:
            return dt.datetime.fromisoformat(text)
        except ValueError:
            pass
    return str_to_date(value)


class OptimaJob(Job):
    """RQ's Job with JSON serialization (never pickle: whoever writes to Redis must not run code),
    which imports only declared jobs (queues/catalog/jobs.py) and carries its signature
    (queues/jobs/signing.py) in the hash field ``signature``, and the trace context of its enqueue
    (queues/tracing/carrier.py) in ``optima_trace``: both outside the signed ``data``.

    The worker refuses a job before it gets here (queues/jobs/gate.py); the guards below make sure that
    nothing else — rq's perform, a callback, a dashboard — imports a name that Redis supplied.
    """

    SIGNATURE_FIELD = "signature"
    TRACE_FIELD = "optima_trace"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("serializer") is None:  # Job.fetch()/fetch_many() pass serializer=None explicitly
            kwargs["serializer"] = JSONSerializer
        super().__init__(*args, **kwargs)
        self.signature = ""
        self.trace = ""

    @classmethod
    def fetch_many(cls, job_ids: Any, connection: Any, serializer: Any = None) -> list[Any]:
        """rq's ``Job.fetch_many`` (one pipeline of HGETALLs), except that a hash ``restore`` refuses (no ``data``, too
        large to run: ``NoSuchJobError``) is no job, None, as a gone one is. rq 3.0.0's raises for the first one, and
        a success moves its dependents through it (``Queue.move_dependents_to_ready``): an entry planted in a job's
        set of dependents failed that job's success, written already, and the job was retried for it."""
        ids = [parse_job_id(job_id) for job_id in job_ids]
        with connection.pipeline() as pipe:
            for job_id in ids:
                pipe.hgetall(cls.key_for(job_id))
            replies = pipe.execute()
        jobs: list[Any] = []
        for job_id, raw in zip(ids, replies):
            job = cls(job_id, connection=connection, serializer=serializer) if raw else None
            if job is not None:
                try:
                    job.restore(raw)
                except NoSuchJobError:
                    job = None
            jobs.append(job)
        return jobs

    def restore(self, raw_data: dict[Any, Any]) -> None:
        why = entries.too_large(raw_data)  # before rq inflates ``data`` whole: a zlib bomb planted in Redis
        if why is not None:
            raise entries.TooLarge(why)
        data = dict(raw_data)  # the dates are parsed here (``parse_date``), the rest by rq
        dates = [(name, data.pop(name.encode(), None) or data.pop(name, None)) for name in DATE_FIELDS]
        super().restore(data)  # (created_at: now() without one, the others None, as with an empty field)
        for name, value in dates:
            if value:
                setattr(self, name, parse_date(value))
        value = raw_data.get(b"signature") or raw_data.get("signature") or b""
        self.signature = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
        value = raw_data.get(b"optima_trace") or raw_data.get("optima_trace") or b""
        self.trace = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)

    def to_dict(self, include_meta=True, include_result=True):
        mapping = super().to_dict(include_meta=include_meta, include_result=include_result)
        if self.signature:
            mapping[self.SIGNATURE_FIELD] = self.signature
        if self.trace:
            mapping[self.TRACE_FIELD] = self.trace
        return mapping

    # rq's two writes of the results stream, with its trim per attempt instead of rq's ten (queues/jobs/stream.py);
    # the rest as rq's Job writes it in these two methods (rqcompat.MEMBERS lists both).
    def _handle_success(
        self,
        result_ttl,
        pipeline,
        worker_name="",
        execution_id=None,
        execution_started_at=None,
        execution_ended_at=None,
    ):
        self.set_status(JobStatus.FINISHED, pipeline=pipeline)
        self.save(pipeline=pipeline, include_meta=False, include_result=False)  # rq's: the user's meta untouched
        stream.record(
            self,
            Result.Type.SUCCESSFUL,
            result_ttl,
            pipeline,
            attempt=jobmeta.current_attempt(self),
            return_value=rqcompat.cached_result(self),
            worker_name=worker_name,
            execution_id=execution_id,
            execution_started_at=execution_started_at,
            execution_ended_at=execution_ended_at,
        )
        if result_ttl != 0:
            self.finished_job_registry.add(self, result_ttl, pipeline)

    def _handle_failure(
        self,
        exc_string,
        pipeline,
        worker_name="",
        execution_id=None,
        execution_started_at=None,
        execution_ended_at=None,
    ):
        self.failed_job_registry.add(self, ttl=self.failure_ttl, exc_string=exc_string, pipeline=pipeline)
        stream.record(
            self,
            Result.Type.FAILED,
            self.failure_ttl,
            pipeline,
            attempt=jobmeta.current_attempt(self),
            exc_string=exc_string,
            worker_name=worker_name,
            execution_id=execution_id,
            execution_started_at=execution_started_at,
            execution_ended_at=execution_ended_at,
        )

    @property
    def func(self):
        return _declared_or_refuse(self.func_name, "function", self.instance)

    def _execute(self):
        # rq's, but the coroutine of an ``async def`` job goes to this thread's runner: an ``rqworker --async``
        # worker's one event loop, else rq's ``asyncio.run`` (queues/jobs/coroutines.py; rqcompat.MEMBERS lists it).
        result = self.func(*self.args, **self.kwargs)
        if asyncio.iscoroutine(result):
            return coroutines.run(result)
        return result

    @property
    def success_callback(self):
        return _declared_or_refuse(rqcompat.callback_names(self)[0], "success callback")

    @property
    def failure_callback(self):
        if getattr(self, "_queues_pausing", False):  # a long job's pause at a checkpoint is no failure (issue 34)
            return None
        return _declared_or_refuse(rqcompat.callback_names(self)[1], "failure callback")

    @property
    def stopped_callback(self):
        return _declared_or_refuse(rqcompat.callback_names(self)[2], "stopped callback")


def _declared_or_refuse(name, what, instance=None):
    if not name:
        return None
    if instance is not None:
        raise NotAJob(f"the job names a method {name!r} of an instance: only declared functions run")
    func = catalog.get(name)
    if func is None:
        raise NotAJob(f"its {what} {catalog.why_not(name)}")
    return func


class OptimaQueue(Queue):
    """RQ's Queue bound to JSON jobs. django-rq's panel builds it too (RQ_QUEUES' QUEUE_CLASS).

    Priority bands (``queues.enqueue(..., priority=)``): a queue is three lists, popped high before
    normal before low (worker/dequeue.py), FIFO within each: ``<p>:queue:<q>:high``, rq's own
    ``<p>:queue:<q>`` (normal: a job without a priority is exactly what it was before bands) and
    ``<p>:queue:<q>:low`` (``keys.band_key``). Every push that reaches this class (rq's
    ``_enqueue_job``: the enqueue, retries, the panel's requeue) goes to the job's band
    (``jobs.meta.band``), ``at_front`` to the head of that band. The reads and the removals below
    treat the three as one queue, in pop order; ``key`` stays the normal band's (rq's and
    django-rq's own uses of it: the queue set, the intermediate list, registries).
    """

    job_class = OptimaJob

    def __init__(self, name="default", *args, **kwargs):
        kwargs["serializer"] = JSONSerializer
        kwargs["job_class"] = OptimaJob
        kwargs.pop("autocommit", None)
        kwargs.pop("commit_mode", None)
        super().__init__(name, *args, **kwargs)

    @property
    def config(self):
        """The declared QueueConfig of this queue."""
        return get_config(self.name)

    # -- bands ---------------------------------------------------------------------------------
    def band(self, band):
        """This queue as rq's push paths see one band of it: the same queue whose ``key`` is the
        band's list. For rq's own ``_enqueue_job`` and for helpers that push to ``queue.key``."""
        return self if band == jobmeta.NORMAL else _BandQueue(self, band)

    def _enqueue_job(self, job, pipeline=None, at_front=False, unique=False):  # rqcompat.MEMBERS lists it
        band = jobmeta.band(job)
        if band == jobmeta.NORMAL or not self.is_async:
            return rqcompat.rq_enqueue_job(self, job, pipeline=pipeline, at_front=at_front, unique=unique)
        mark_banded(pipeline if pipeline is not None else self.connection, self.name)
        return rqcompat.rq_enqueue_job(self.band(band), job, pipeline=pipeline, at_front=at_front, unique=unique)

    @property
    def band_keys(self):
        """The queue's lists in pop order: high, normal, low."""
        return keys.band_keys(self.key)

    def band_counts(self):
        """[high, normal, low] lengths, one round trip."""
        with self.connection.pipeline(transaction=False) as pipe:
            for key in self.band_keys:
                pipe.llen(key)
            return [int(n) for n in pipe.execute()]

    @property
    def count(self):
        return sum(self.band_counts())

    def get_job_ids(self, offset=0, length=-1):
        """Job ids in pop order (high, normal, low), ``offset``/``length`` across the three."""
        if length == 0:
            return []
        ids = []
        for key, size in zip(self.band_keys, self.band_counts()):
            if offset >= size:
                offset -= size
                continue
            want = -1 if length < 0 else length - len(ids)
            ids += self.band_range(key, offset, -1 if want < 0 else offset + want - 1)
            offset = 0
            if 0 <= length <= len(ids):
                break
        return ids

    def band_range(self, key, start, end):
        """The ids of one band's list from ``start`` to ``end`` (LRANGE's bounds), as text."""
        return [as_text(i) for i in self.connection.lrange(key, start, end)]

    def get_job_position(self, job_or_id):
        job_id = job_or_id.id if isinstance(job_or_id, Job) else job_or_id
        before = 0
        for key, size in zip(self.band_keys, self.band_counts()):
            position = self.connection.lpos(key, job_id)
            if position is not None:
                return before + position
            before += size
        return None

    def remove(self, job_or_id, pipeline=None):
        job_id = job_or_id.id if isinstance(job_or_id, Job) else job_or_id
        connection = pipeline if pipeline is not None else self.connection
        removed = [connection.lrem(key, 1, job_id) for key in self.band_keys]
        return None if pipeline is not None else sum(removed)

    def empty(self):
        """rq's ``empty`` (its Lua deletes each popped job and its results) on every band."""
        return sum(Queue.empty(self.band(band)) for band in jobmeta.BANDS)

    def delete(self, delete_jobs=True):
        super().delete(delete_jobs=delete_jobs)  # empties every band (``empty``) and forgets the queue
        self.connection.delete(*self.band_keys, keys.banded_key(self.name))

    def compact(self):
        for band in jobmeta.BANDS:
            if self.connection.exists(keys.band_key(self.key, band)):
                Queue.compact(self.band(band))


class _BandQueue(OptimaQueue):
    """One band of an OptimaQueue (``OptimaQueue.band``): its attributes, ``key`` the band's list."""

    def __init__(self, queue, band):  # super().__init__ not called: a view of ``queue``
        self.__dict__.update(queue.__dict__)
        self.band_name = band

    @property
    def key(self):
        return keys.band_key(keys.queue_key(self.name), self.band_name)


def mark_banded(connection, name):
    """Note (``keys.banded_key``, for a day) that queue ``name`` has jobs in its high or low band: its
    single-queue workers then poll the three lists instead of blocking on the normal one."""
    connection.set(keys.banded_key(name), 1, ex=keys.BANDED_SECONDS)
