"""django-rq's panel views made JSON-only and read-only, without copying them.

Why patched rather than replaced: django-rq's views are ~700 lines of pages and templates we want
unchanged (STYLE: use the library that already does the job). What made them unsafe is a handful
of names they import, so ``patches.install()`` (called by ``urls.py`` and ``manage.py rqstats``) rebinds
those names *in django-rq's modules only* (the table ``patches.REBIND``); rq itself, the workers and
the schedulers are untouched.

What django-rq used, what it did on a GET, and what it is rebound to:

- ``StartedJobRegistry(...)`` and the other registries, built without a serializer: ``len()`` runs
  ``cleanup()``, which fetches expired jobs with **pickle** and moves them to failed (and, in rq 3.0,
  promotes rate-limited jobs) -> ``_read_only(cls)``: JSON, ``OptimaJob``, a ``cleanup()`` that does nothing.
- ``get_queue_by_index`` / ``get_queue``: ``queue.fetch_job`` LREMs an id whose hash is gone ->
  ``ReadOnlyQueue`` (the registries above, no removal).
- ``get_jobs``: removes from the registry ids whose hash is gone -> ``get_jobs`` that skips them.
- ``get_executions``: its ``Execution.job`` fetches the job with pickle -> each job read as JSON here.
- ``Job.fetch`` and every job list: raise on a poison job (not UTF-8, no ``data``, garbage, a key of
  the wrong type) -> read through ``jobread``: a ``CorruptJob`` shown as "corrupt: <why>"; a list or
  registry key of the wrong type reads as empty (reported once: ``entries.report``), an id that is not
  UTF-8 or that rq rejects is shown escaped (``jobread.shown_id``).
- ``get_statistics``: stops at a poison head job or a key of the wrong type -> ``stats.statistics``.
- ``clean_worker_registry`` / ``clean_registries``: SREM / registry maintenance -> nothing.
- ``Worker`` (and ``get_worker_class`` of django-rq's ``metrics``): ``find_by_key`` builds a pickle worker
  whose current job is fetched with pickle, SREMs a gone worker, and a worker set or hash of the wrong
  type raises -> ``readers.JSONWorker``.
- ``DjangoCronScheduler.all(cleanup=True)``: ZREMs stale cron schedulers -> ``ReadOnlyCronScheduler``.
- ``get_scheduler_by_index``: rq-scheduler's ``get_jobs`` cancels ids whose hash is gone, and raises
  for its sorted set of the wrong type or a poison job -> ``readers.read_only_scheduler``.

The dashboard (``views.home``) reads ``stats.statistics()``, which never runs maintenance; django-rq's
``metrics`` of the panel gets ``ReadOnlyQueue`` too (``django_rq.contrib.prometheus.get_queue``).
Registry maintenance is the workers' job (rq's maintenance task), never a page's.
``tests/queues/trust/test_no_pickle.py`` plants pickles everywhere and walks every panel URL.
"""

import redis
from django_rq import queues as django_rq_queues
from django_rq.cron import DjangoCronScheduler
from rq.exceptions import NoSuchJobError
from rq.executions import Execution
from rq.registry import (
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.serializers import JSONSerializer

from queues import rqcompat
from queues.board.readers import JSONWorker, read_only_scheduler  # noqa: F401 (JSONWorker: rebound by patches)
from queues.catalog.lookup import OptimaJob, OptimaQueue
from queues.jobs import read as jobread
from queues.keyspace import entries


def wrong_type(key, exc, empty):
    """A key of the wrong type reads as ``empty`` (reported once: ``entries.report``); other errors are raised."""
    if "WRONGTYPE" not in str(exc):
        raise exc
    entries.report(key, "not of the type rq expects (WRONGTYPE): the panel shows it as empty")
    return empty


def _entry_job_id(cls, entry):
    """The job id of a registry entry as pages show it (``shown_id``): the started registry's entries
    are ``<job id>:<execution id>``, the others' the job id itself (which may hold a ``:``)."""
    if issubclass(cls, StartedJobRegistry):
        entry = _raw(entry).split(b":", 1)[0]
    return jobread.shown_id(entry)


def _raw(entry):
    return entry if isinstance(entry, bytes) else entry.encode("utf-8")


def _read_only(cls):
    """``cls`` (an rq registry) reading JSON jobs, with a ``cleanup`` that writes nothing, and
    poison entries (ids not UTF-8, a key of the wrong type) read without raising."""

    def __init__(self, *args, **kwargs):
        cls.__init__(self, *args, **kwargs)
        self.serializer = JSONSerializer
        self.job_class = OptimaJob

    def cleanup(self, *args, **kwargs):
        return []  # a page only reads: the workers' maintenance cleans registries

    def get_job_count(self, cleanup=True):
        try:
            return self.connection.zcard(self.key)
        except redis.ResponseError as exc:
            return wrong_type(self.key, exc, 0)

    def _entries(self, start, end, desc):
        try:
            return self.connection.zrange(self.key, start, end, desc=desc)
        except redis.ResponseError as exc:
            return wrong_type(self.key, exc, [])

    def get_job_ids(self, start=0, end=-1, desc=False, cleanup=True):
        return [_entry_job_id(cls, e) for e in _entries(self, start, end, desc)]

    def get_job_and_execution_ids(self, start=0, end=-1, desc=False, cleanup=True):
        pairs = [(_raw(e).split(b":", 1) + [b""])[:2] for e in _entries(self, start, end, desc)]
        return [(jobread.shown_id(job_id), jobread.text(execution_id)) for job_id, execution_id in pairs]

    def get_scheduled_time(self, job_or_id):
        """rq's, for a ``CorruptJob`` too (by its id as Redis holds it); a score that is no time (1e308,
        -1) is reported once and shown as none."""
        if jobread.is_corrupt(job_or_id):
            job_or_id = job_or_id.raw_id
        try:
            when = cls.get_scheduled_time(self, job_or_id)
            if when.timestamp() >= 0:
                return when
            why = f"the score {when.timestamp()}"
        except (OverflowError, ValueError, OSError) as exc:
            why = f"a score that is not a time ({exc})"
        entries.report(
            self.key, f"member {jobread.text(getattr(job_or_id, 'id', job_or_id))!r} has {why}: shown without a time"
        )
        return None

    attrs = {
        "__init__": __init__,
        "cleanup": cleanup,
        "get_job_count": get_job_count,
        "get_job_ids": get_job_ids,
        "get_job_and_execution_ids": get_job_and_execution_ids,
        "__module__": __name__,
    }
    if hasattr(cls, "get_scheduled_time"):
        attrs["get_scheduled_time"] = get_scheduled_time
    return type(f"ReadOnly{cls.__name__}", (cls,), attrs)


REGISTRIES = {
    cls.__name__: _read_only(cls)
    for cls in (
        StartedJobRegistry,
        FinishedJobRegistry,
        FailedJobRegistry,
        DeferredJobRegistry,
        ScheduledJobRegistry,
        CanceledJobRegistry,
    )
}


class ReadOnlyQueue(OptimaQueue):
    """The panel's queue: JSON jobs, read-only registries, and ``fetch_job`` never removes an id."""

    def fetch_job(self, job_id):
        job = jobread.fetch(job_id, self.connection)
        return job if job is not None and (jobread.is_corrupt(job) or job.origin == self.name) else None

    def band_counts(self):
        """[high, normal, low] lengths (priority bands, counted as one queue); a band key of the wrong
        type counts 0 (reported)."""
        with self.connection.pipeline(transaction=False) as pipe:
            for key in self.band_keys:
                pipe.llen(key)
            replies = pipe.execute(raise_on_error=False)
        return [
            wrong_type(key, reply, 0) if isinstance(reply, redis.ResponseError) else int(reply)
            for key, reply in zip(self.band_keys, replies)
        ]

    def band_range(self, key, start, end):
        try:
            return [jobread.shown_id(i) for i in self.connection.lrange(key, start, end)]
        except redis.ResponseError as exc:
            return wrong_type(key, exc, [])

    def get_jobs(self, offset=0, length=-1):
        return [job for job in jobread.fetch_many(self.get_job_ids(offset, length), self.connection) if job]

    @property
    def scheduler_pid(self):
        """The PID of rq's scheduler holding this queue's lock (rq's ``Queue.scheduler_pid``), None when none
        does; a lock or scheduler hash rq cannot read (wrong type, not UTF-8, not a number) reads as none
        (reported)."""
        try:
            return super().scheduler_pid
        except redis.ResponseError as exc:
            return wrong_type(f"the scheduler lock of {self.name}", exc, None)
        except (UnicodeDecodeError, ValueError) as exc:
            entries.report(f"the scheduler lock of {self.name}", f"cannot be read ({type(exc).__name__}): no PID shown")
            return None

    def _registry(self, name):
        return REGISTRIES[name](queue=self)

    started_job_registry = property(lambda self: self._registry("StartedJobRegistry"))
    finished_job_registry = property(lambda self: self._registry("FinishedJobRegistry"))
    failed_job_registry = property(lambda self: self._registry("FailedJobRegistry"))
    deferred_job_registry = property(lambda self: self._registry("DeferredJobRegistry"))
    scheduled_job_registry = property(lambda self: self._registry("ScheduledJobRegistry"))
    canceled_job_registry = property(lambda self: self._registry("CanceledJobRegistry"))


class ReadOnlyCronScheduler(DjangoCronScheduler):
    @classmethod
    def all(cls, connection, cleanup=True):
        return super().all(connection, cleanup=False)


def get_queue_by_index(index):
    queue = django_rq_queues.get_queue_by_index(index)
    return ReadOnlyQueue(queue.name, connection=queue.connection, is_async=rqcompat.is_async(queue))


def get_queue(name, *args, **kwargs):
    queue = django_rq_queues.get_queue(name, *args, **kwargs)
    return ReadOnlyQueue(queue.name, connection=queue.connection, is_async=rqcompat.is_async(queue))


def get_scheduler_by_index(index):
    return read_only_scheduler(django_rq_queues.get_scheduler_by_index(index))


def get_jobs(queue, job_ids, registry=None):
    """django-rq's ``get_jobs`` without removing the ids whose hash is gone; a poison job comes back as
    a ``CorruptJob`` (shown "corrupt: <why>")."""
    return [job for job in jobread.fetch_many(job_ids, queue.connection) if job is not None]


class PanelJob(OptimaJob):
    """django-rq's views' ``Job``: ``fetch`` gives a ``CorruptJob`` for a poison job, never raises for it."""

    @classmethod
    def fetch(cls, id, connection=None, serializer=None):
        job = jobread.fetch(id, connection)
        if job is None:
            raise NoSuchJobError(f"No such job: {jobread.text(id)}")
        return job


def get_executions(queue, composite_keys):
    """django-rq's ``get_executions``, with each execution's job read here (JSON, a poison job as a
    ``CorruptJob``): rq's ``Execution.job`` fetches it with rq's default serializer, pickle. An
    execution whose job hash is gone, or that rq cannot read, is left out."""

    executions = []
    for job_id, execution_id in composite_keys:
        try:
            execution = Execution.fetch(id=execution_id, job_id=job_id, connection=queue.connection)
        except (ValueError, KeyError, OverflowError, OSError, UnicodeDecodeError, redis.ResponseError):
            continue  # rq cannot read it (a field missing, not a number, a date out of range): not listed
        job = jobread.fetch(job_id, queue.connection)
        if job is None:
            continue
        rqcompat.set_execution_job(execution, job)
        executions.append(execution)
    return executions


def clean_worker_registry(queue):
    """A page leaves dead worker keys to the workers' maintenance."""


def clean_registries(queue, exception_handlers=None):
    """A page leaves registry maintenance to the workers (get_statistics(run_maintenance_tasks=True))."""
