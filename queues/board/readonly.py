"""The panel's read-only queue and registries: what every page reads Redis's lists and registries through.

rq's own, used as they are, would write or unpickle on a page: a registry built without a serializer counts
with ``cleanup()``, which fetches expired jobs with **pickle** and moves them to failed (and, in rq 3.0,
promotes rate-limited jobs); ``queue.fetch_job`` LREMs an id whose hash is gone; a key of the wrong type or
an id that is not UTF-8 raises. Here:

- ``REGISTRIES``: rq's registries reading JSON jobs (``OptimaJob``), a ``cleanup()`` that does nothing, a key
  of the wrong type read as empty (``wrong_type``: reported once), ids shown escaped (``jobread.shown_id``),
  a score that is no time shown without one;
- ``ReadOnlyQueue``: those registries, ``fetch_job`` that never removes an id, the priority bands' counts in
  one pipeline, rq's scheduler PID read without raising;
- ``get_queue_by_index``: the declared queue at a panel URL's index, on the panel's bounded client.

Registry maintenance is the workers' job (rq's maintenance task), never a page's.
``tests/queues/trust/test_no_pickle.py`` plants pickles everywhere and walks every panel URL.
"""

import redis
from django_rq.settings import get_queues_list
from rq.registry import (
    CanceledJobRegistry,
    DeferredJobRegistry,
    FailedJobRegistry,
    FinishedJobRegistry,
    ScheduledJobRegistry,
    StartedJobRegistry,
)
from rq.serializers import JSONSerializer

from queues.board import bounded
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


def get_queue_by_index(index):
    """The declared queue at ``index`` (the panel's URLs number queues as django-rq does: ``RQ_QUEUES``' order),
    read-only, on the panel's client of the queue's server (``bounded.queue_connection``: the request's bounded
    one inside a page)."""
    name = get_queues_list()[int(index)]["name"]
    return ReadOnlyQueue(name, connection=bounded.queue_connection(name))
