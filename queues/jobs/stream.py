"""The writes of a job's results stream: one entry per attempt of its current life, not rq's last ten.

rq 3 appends each outcome of a job (success, failure, retried attempt) to the stream ``<p>:results:<id>``
with ``XADD ... MAXLEN ~ 10`` (``Result.save``): Redis trims whole nodes of entries, so a job keeps about ten,
fewer when tracebacks are long (a node holds at most 4 KB, ``stream-node-max-bytes``). The Tasks API's
``TaskResult.errors`` is one entry per failed attempt (queues/tasks/results.py, issue 35 §4) and a task may
have any ``MAX_ATTEMPTS``: with rq's trim, the 12th attempt of a task would show its last ten errors, and a
success written by rq would cut the failures before it.

So every write of the stream in this project goes through ``record``, whose trim is exact and keeps
``kept(attempt)`` entries: at least rq's ten, and one per attempt of the job's current life plus one (the outcome
of the attempt being written), up to ``MAX_KEPT`` (a job with more attempts keeps its last ``MAX_KEPT``).
rq's own writes of the stream are its Job's success and failure writes (``_handle_success`` and ``_handle_failure``,
which ``OptimaJob`` overrides to call ``record``); the rest are the project's (queues/failures/handler.py,
queues/failures/deadletter.py, queues/worker/fastpath.py). A stream's entries are small (an outcome, an
exception string zlib-compressed), and a job that succeeds at once keeps one.
"""

from typing import TYPE_CHECKING, Any

from rq.results import Result

if TYPE_CHECKING:
    from redis.client import Pipeline
    from rq.job import Job

RQ_KEPT = 10  # rq's MAXLEN (Result.save)
MAX_KEPT = 1000  # entries at most, whatever the attempts


def kept(attempt: int) -> int:
    """How many entries a job's stream keeps at its write of ``attempt`` (1-based, ``jobs.meta.current_attempt``)."""
    return min(max(RQ_KEPT, attempt + 1), MAX_KEPT)


class KeptResult(Result):
    """rq's ``Result`` whose ``save`` trims the stream to exactly ``keep`` entries (rq's: about ten)."""

    keep = RQ_KEPT

    def save(self, ttl, pipeline=None):
        # rq's Result.save with its MAXLEN ~ 10 replaced: the rest as rq writes it
        key = self.get_key(self.job_id)
        connection = pipeline if pipeline is not None else self.connection
        result = connection.xadd(key, self.serialize(), maxlen=self.keep, approximate=False)
        if pipeline is None:
            self.id = result.decode()
        if ttl is not None:
            if ttl == -1:
                connection.persist(key)
            else:
                connection.expire(key, ttl)
        return self.id


def record(
    job: "Job", type: Result.Type, ttl: int | None, pipeline: "Pipeline | None" = None, *, attempt: int, **fields: Any
) -> Result:
    """Append the outcome of ``job``'s attempt ``attempt`` to its results stream (rq's ``Result.create`` with this
    module's trim); ``fields``: ``Result``'s (``return_value``, ``exc_string``, ``worker_name``, ``execution_*``).
    The caller reads ``attempt`` (``jobs.meta.current_attempt``): this module imports nothing of the project."""
    result = KeptResult(job_id=job.id, type=type, connection=job.connection, serializer=job.serializer, **fields)
    result.keep = kept(attempt)
    result.save(ttl=ttl, pipeline=pipeline)
    return result
