"""Reading a job's results stream that may be poison: the results rq can restore, bounded; never an exception.

rq 3 keeps a job's results in a stream ``<p>:results:<id>`` (one entry per attempt: queues/jobs/stream.py),
each entry base64 (return value: the job's serializer, JSON here) and base64 + zlib (exception
string). rq's ``Result.restore`` raises on an entry that is not (``binascii.Error``, ``zlib.error``,
``ValueError``, ``KeyError``), and ``XREVRANGE`` on a key that is not a stream raises ``WRONGTYPE``:
the job's panel page, its result page and ``/jobs/<id>/`` answered 500 or 503.

``ReadJob`` is the job ``jobs/read.py`` hands out: rq's job (``OptimaJob``) whose ``results()`` and
``latest_result()`` read through ``read`` here (and whose ``dependent_ids`` reads a dependents set of
the wrong type as none, reported):

| what the stream holds                     | what ``read`` gives                                            |
| ----------------------------------------- | -------------------------------------------------------------- |
| no key                                    | ``[]``                                                         |
| a key that is not a stream                | ``[]``, the key reported (``entries.report``)                  |
| an entry rq cannot restore                | left out, reported                                             |
| an exception string over ``TEXT_CHARS``   | cut (``entries.cut``), never decompressed past the cap          |
| a return value over ``RESULT_BYTES``      | the text ``"(<n> bytes: not shown)"`` instead                  |

A waiting read (``latest_result(timeout=...)``, a caller that blocks for a result) is rq's own.
Nothing here writes.
"""

import base64
import zlib

import redis
from rq.job import Job
from rq.results import Result

from queues.catalog.classes import OptimaJob
from queues.keyspace import entries, keys

RESULTS_READ = 10  # the last results read by default (the stream keeps one per attempt: queues/jobs/stream.py)


def _bounded(payload):
    """The stream entry ``payload`` with its exception string and return value within the caps."""
    payload = dict(payload)
    exc = payload.get(b"exc_string")
    if exc:
        inflated, whole = entries.inflate(base64.b64decode(exc, validate=True), entries.TEXT_CHARS * 4)
        shown = inflated.decode("utf-8", "backslashreplace")
        if not whole or len(shown) > entries.TEXT_CHARS:
            shown = shown[: entries.TEXT_CHARS] + entries.TRUNCATED.format(
                size="more", kept=f"{entries.TEXT_CHARS} characters"
            )
            payload[b"exc_string"] = base64.b64encode(zlib.compress(shown.encode("utf-8")))
    value = payload.get(b"return_value")
    if value is not None and len(value) > entries.RESULT_BYTES:
        marker = f'"({len(value) * 3 // 4} bytes: not shown)"'.encode()
        payload[b"return_value"] = base64.b64encode(marker)
    return payload


def read(job: Job, count: int = RESULTS_READ) -> list[Result]:
    """The job's last ``count`` results, newest first, as rq's ``Result``; entries rq cannot
    restore are left out and reported."""
    key = keys.results_key(job.id)
    try:
        entries_ = job.connection.xrevrange(key, "+", "-", count=count)
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        entries.report(key, "not a stream (WRONGTYPE): no results shown")
        return []
    results = []
    for result_id, payload in entries_:  # type: ignore[union-attr]  # typed Optional by redis-py; a list
        result_id = entries.text(result_id)
        try:
            results.append(
                Result.restore(
                    job.id, result_id, _bounded(payload), connection=job.connection, serializer=job.serializer
                )
            )
        except Exception as exc:  # noqa: BLE001 — whatever the entry holds, it is not a result
            entries.report(key, f"entry {result_id} is not a result rq can read ({type(exc).__name__})")
    return results


class ReadJob(OptimaJob):
    """The job ``jobs/read.py`` hands out: rq's, with its results read through ``read`` (bounded,
    never raising for what the stream holds) and its dependents set of the wrong type read as none."""

    @property
    def dependent_ids(self):
        try:
            members = self.connection.smembers(self.dependents_key)
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            entries.report(self.dependents_key, "not a set (WRONGTYPE): no dependents read")
            return []
        return [entries.text(m) for m in members]

    def results(self):
        return read(self)

    def latest_result(self, timeout=0):
        if timeout:
            return super().latest_result(timeout=timeout)
        found = read(self, count=1)
        return found[0] if found else None
