"""Reading a job that may be poison: a job, ``None`` (gone), or a ``CorruptJob`` — never an exception.

Used by the panel, the dead-letter reconcile, the abandoned-job scan and ``/jobs/<id>/``.

Someone with write access to the queues' Redis can plant entries rq cannot read. rq's own
``Job.fetch`` / ``fetch_many`` then raise (``UnicodeDecodeError``, ``NoSuchJobError`` for a hash
without ``data``, ``WRONGTYPE``, ``ValueError`` on a bad status) or return a job whose ``func_name``
raises later. Everything that lists or acts on jobs for an operator (the panel, the dead-letter
reconcile, the abandoned-job scan) reads through here instead:

| what Redis holds                                  | what ``load`` returns                          |
| ------------------------------------------------- | ---------------------------------------------- |
| no key                                            | ``None``                                       |
| a key that is not a hash (``WRONGTYPE``)          | ``CorruptJob`` "key ... is not a hash"         |
| a hash without ``data``                           | ``CorruptJob`` "no data field"                 |
| a job id rq rejects (outside ``[A-Za-z0-9_-]``:   | ``CorruptJob`` "its id is not one rq accepts"  |
| ``r2.dot.id``, ``../../x``, ``a:b``; rq's ``Job`` |                                                |
| raises ``ValueError`` for it)                     |                                                |
| a field (other than the binary ``data`` /         | ``CorruptJob`` "field 'x' is not UTF-8"        |
| ``exc_info``) or the job id that is not UTF-8     |                                                |
| a hash over ``entries.JOB_BYTES`` (256 KiB, its  | ``CorruptJob`` "too large" (``kind``           |
| ``caps=RUN``: ``entries.RUN_BYTES``, 16 MiB;      |                                                |
| ``data`` decompressed: never past the cap)        | ``too_large``): its fields cut for the page    |
| a hash over ``entries.READ_BYTES`` as stored, or  | the same, and the hash never crosses the wire: |
| with over ``entries.JOB_FIELDS`` fields           | Redis sends its first fields, cut (``capped``) |
| ``data`` that is not a zlib/JSON job payload      | ``CorruptJob`` "data is not a JSON job payload"|
| ``data`` whose args are no list or kwargs no      | ``CorruptJob`` "data is not [function, ...]"   |
| object (never reported as the mapping's keys)     |                                                |
| ``meta`` / ``result`` that is not JSON            | ``CorruptJob`` "meta is not JSON" ...          |
| an ``origin`` that is not a declared queue        | ``CorruptJob`` (only with ``check_origin``)    |
| anything else                                     | the job (``results.ReadJob``: an ``OptimaJob`` |
|                                                   | whose results stream is read without raising)  |

A job hash is read size-checked (``capped.py``: ``read_hash``, ``capped.read_key``), not with HGETALL: a hash
planted at 100 MB would otherwise cross the wire whole, on every page that shows it, before ``_why_size`` found it
too large.

Nothing here decodes anything but JSON, and nothing writes — except ``raw_delete``, which an
operator asks for ("Delete" of a corrupt job: DEL of its hash, its entries in its queue's list and
registries).
"""

import codecs
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import redis
from rq.job import UNSERIALIZABLE_RETURN_VALUE_PAYLOAD, validate_job_id
from rq.registry import CanceledJobRegistry, DeferredJobRegistry

from queues import rqcompat
from queues.catalog.lookup import queue_names
from queues.jobs import capped
from queues.jobs.results import ReadJob
from queues.keyspace import entries, keys

if TYPE_CHECKING:
    from typing_extensions import TypeIs


@dataclass(frozen=True)
class Caps:
    """How large a job hash a reader takes for a job: ``stored``, the bytes as stored of a hash read whole;
    ``why_size``, why a hash read whole is too large (None when it is not); ``why_oversized``, why one read cut
    (``capped.Oversized``) is. ``PAGE`` to show it, ``RUN`` to act on it as a worker would run it."""

    stored: int
    why_size: Callable[[dict], str | None]
    why_oversized: Callable[[capped.Oversized], str]


BINARY_FIELDS = {b"data", b"exc_info"}  # zlib-compressed by rq: bytes by design
PREVIEW_FIELDS = 50  # fields shown of a corrupt hash
PREVIEW_CHARS = entries.PREVIEW_CHARS  # characters shown of each value


def text(value):
    """``value`` (bytes or str) as printable text: bytes that are not UTF-8 shown as ``\\xNN``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def shown_id(job_id):
    """A job id (bytes or str) as pages and URLs show it, reversibly (``raw_id``): bytes that are not
    UTF-8 as ``\\xNN``, and ``\\`` and ``/`` too (``\\x5c``, ``\\x2f``), so that an id rq rejects
    (``../../x``) still fits in one URL segment. An id rq accepts is shown as it is; one longer than
    ``entries.ID_CHARS`` is cut (not reversible: its own page is not found, a list's Delete all and
    Empty remove it)."""
    raw = job_id if isinstance(job_id, bytes) else job_id.encode("utf-8")
    if len(raw) > entries.ID_CHARS:
        raw = raw[: entries.ID_CHARS // 2] + f"…(+{len(raw) - entries.ID_CHARS // 2} bytes)".encode()
    return raw.replace(b"\\", b"\\x5c").replace(b"/", b"\\x2f").decode("utf-8", "backslashreplace")


def raw_id(job_id):
    """The id as Redis holds it, from ``shown_id`` (or ``text``) of it: str when it is UTF-8, else
    bytes (so the operator can delete what a list shows); an id without ``\\x`` is itself."""
    if isinstance(job_id, bytes) or "\\x" not in job_id:
        return job_id
    try:
        raw = codecs.escape_decode(job_id.encode("utf-8"))[0]
    except ValueError:
        return job_id
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def job_key(job_id):
    """The job hash key of ``job_id`` (str or raw bytes)."""
    if isinstance(job_id, bytes):
        return keys.job_key_prefix().encode() + job_id
    return keys.job_key(job_id)


def preview(fields, limit=PREVIEW_FIELDS, chars=PREVIEW_CHARS):
    """[(name, value)] of a raw hash as printable, truncated text (for pages; never raw bytes)."""

    def short(value):
        shown = text(value[: chars * 4])  # a 50 MB value is never decoded whole
        size = entries.size_of(value)
        if size <= chars and len(shown) <= chars:
            return shown
        if not value:  # too large to be read at all (``capped.READ_VALUE_BYTES``)
            return f"({size} bytes: too large to read)"
        return f"{shown[:chars]}… (truncated: {size} bytes in all)"

    return [(short(k), short(v)) for k, v in list(fields)[:limit]]


@dataclass
class CorruptJob:
    """What a page shows instead of a job it cannot read. Attributes named like rq's Job's, so
    django-rq's templates render it (its ``func_name`` says "corrupt: <why>")."""

    id: str  # printable, fits a URL (``shown_id``); ``raw_id`` gives what Redis holds
    why: str
    fields: list = field(default_factory=list)  # [(field bytes, value bytes)] as read (``capped``: maybe cut)
    kind: str = "content"  # "wrong_type" (no hash), "no_data", "id" (not UTF-8, or rq rejects it), "too_large",
    # "content" (unreadable)
    count: int | None = None  # the fields its hash has, when ``fields`` holds only the first (a hash over the caps)
    is_corrupt = True
    origin = ""
    description = None
    created_at = enqueued_at = started_at = ended_at = None
    args = ()
    kwargs: ClassVar[dict[str, object]] = {}  # class attributes, not fields (no annotation made them so)
    meta: ClassVar[dict[str, object]] = {}

    @property
    def func_name(self):
        return f"corrupt: {self.why}"

    @property
    def raw_id(self):
        return raw_id(self.id)

    @property
    def preview(self):
        return preview(self.fields)

    def get_status(self, refresh=False):
        return "corrupt"

    def __str__(self):
        return f"corrupt job {self.id}: {self.why}"


def why_id(job_id: str) -> str | None:
    """Why rq cannot build a job of ``job_id`` (a str), or None: rq's ``Job`` raises ``ValueError``
    for an id outside ``[A-Za-z0-9_-]`` (``r2.dot.id``, ``../../x``, ``a:b``, a newline)."""
    try:
        validate_job_id(job_id)
    except (TypeError, ValueError):
        return "its id is not one rq accepts (letters, digits, '_' and '-' only)"
    if len(job_id) > entries.ID_CHARS:
        return f"its id is {len(job_id)} characters long (at most {entries.ID_CHARS} here)"
    return None


def _why_size(raw):
    """Why the hash is too large to read, or None: over ``entries.JOB_BYTES`` with ``data``
    decompressed (only as far as the cap)."""
    size = sum(len(k) + len(v) for k, v in raw.items() if k != b"data")
    data = raw.get(b"data", b"")
    try:
        inflated, whole = entries.inflate(data, max(0, entries.JOB_BYTES - size))
    except zlib.error:
        inflated, whole = data, True  # rq keeps data that is not zlib as it is (then not a payload)
    size += len(inflated) if whole else entries.JOB_BYTES + 1
    if size <= entries.JOB_BYTES:
        return None
    return (
        f"too large to read: its hash is over {entries.JOB_BYTES // 1024} KiB"
        f" ({sum(len(v) for v in raw.values())} bytes as stored)"
    )


PAGE = Caps(entries.READ_BYTES, _why_size, lambda oversized: oversized.why)  # the panel's pages, /jobs/<id>/
# The abandoned-job scan and the dead-letter reconcile: a job as large as a producer writes (entries.RUN_BYTES) is a
# job, not a corrupt one "too large to read" (the panel's pages and actions keep PAGE: docs/operator.md, "Size caps")
RUN = Caps(entries.RUN_STORED_BYTES, entries.too_large, lambda oversized: oversized.why_to_run)


def read_hash(pipe, job_id, caps=PAGE):
    """``capped.read_key`` of ``job_id``'s hash (str or raw bytes), whole up to ``caps``' bytes as stored."""
    capped.read_key(pipe, job_key(job_id), budget=caps.stored)


def _why_fields(raw):
    for name, value in raw.items():
        try:
            name.decode("utf-8")
            if name not in BINARY_FIELDS:
                value.decode("utf-8")
        except UnicodeDecodeError:
            return f"field {text(name)!r} is not UTF-8"
    return None


def _why_job(job, raw, check_origin):
    try:
        job.func_name  # noqa: B018 — deserializes ``data``
    except Exception:  # noqa: BLE001 — whatever the payload is, it is not a job
        return "data is not a JSON job payload (zlib/JSON)"
    if not isinstance(job.args, (list, tuple)) or not isinstance(job.kwargs, dict):
        # What the worker's gate refuses too (jobs/gate.py): a mapping's keys are no arguments.
        return (
            f"data is not [function, instance, args, kwargs]: its args are {type(job.args).__name__}, "
            f"its kwargs {type(job.kwargs).__name__} (a list and an object when written by queues.enqueue)"
        )
    if rqcompat.unreadable_meta(job) is not None or not isinstance(job.meta, dict):
        return "meta is not a JSON object"
    if raw.get(b"result") and rqcompat.cached_result(job) == UNSERIALIZABLE_RETURN_VALUE_PAYLOAD:
        return "result is not JSON"
    if check_origin:
        if job.origin not in queue_names():
            return f"its queue {job.origin!r} is not declared"
    return None


def load(job_id, raw, connection, check_origin=True, caps=PAGE):
    """One job from its ``read_hash`` reply ``raw`` (or an HGETALL one, a dict, or the exception a pipeline
    returned), judged too large by ``caps`` (read with the same)."""
    shown = shown_id(job_id)
    raw = capped.hash_of(raw)
    if isinstance(raw, redis.ResponseError):
        return CorruptJob(shown, f"its key {text(job_key(job_id))} is not a hash (WRONGTYPE)", kind="wrong_type")
    if isinstance(raw, Exception):
        raise raw  # a connection error: the caller's own (503 on a page)
    if not raw:
        return None
    count = raw.count if isinstance(raw, capped.Oversized) else None
    if isinstance(job_id, bytes):
        return CorruptJob(shown, "its id is not UTF-8", list(raw.items()), kind="id", count=count)
    why = why_id(job_id)
    if why is not None:
        return CorruptJob(shown, why, list(raw.items()), kind="id", count=count)
    if isinstance(raw, capped.Oversized):
        return CorruptJob(shown, caps.why_oversized(raw), list(raw.items()), kind="too_large", count=count)
    if b"data" not in raw:
        return CorruptJob(shown, "its hash has no data field", list(raw.items()), kind="no_data")
    why = caps.why_size(raw)
    if why is not None:
        return CorruptJob(shown, why, list(raw.items()), kind="too_large")
    why = _why_fields(raw)
    if why is None:
        job = ReadJob(job_id, connection=connection)
        try:
            job.restore(raw)
        except Exception as exc:  # noqa: BLE001 — rq could not read it: that is the finding
            why = f"{type(exc).__name__}: {text(str(exc))[:200]}"
        else:
            why = _why_job(job, raw, check_origin)
            if why is None:
                return job
    return CorruptJob(shown, why, list(raw.items()))


def normal_id(job_id):
    """A job id from Redis (bytes) or a URL (str, maybe ``text``-escaped) as Redis holds it: str when
    it is UTF-8, else bytes."""
    if isinstance(job_id, bytes):
        try:
            return job_id.decode("utf-8")
        except UnicodeDecodeError:
            return job_id
    return raw_id(job_id)


def fetch_many(
    job_ids: Iterable[str | bytes], connection: redis.Redis, check_origin: bool = True, caps: Caps = PAGE
) -> list[ReadJob | CorruptJob | None]:
    """[job, CorruptJob or None per id] in one round trip (ids: str, escaped str, or bytes)."""
    job_ids = [normal_id(j) for j in job_ids]
    if not job_ids:
        return []
    with connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            read_hash(pipe, job_id, caps)
        replies = pipe.execute(raise_on_error=False)
    return [load(j, r, connection, check_origin, caps) for j, r in zip(job_ids, replies)]


def fetch(
    job_id: str | bytes, connection: redis.Redis, check_origin: bool = True, caps: Caps = PAGE
) -> ReadJob | CorruptJob | None:
    return fetch_many([job_id], connection, check_origin, caps)[0]


def is_corrupt(job: object) -> "TypeIs[CorruptJob]":
    return isinstance(job, CorruptJob)


def delete_keys(pipe, job_id):
    """Queue on ``pipe`` the DEL of a job's hash and results stream, whatever their type."""
    job_id = normal_id(job_id)
    pipe.delete(job_key(job_id))
    pipe.delete(keys.results_key(job_id) if isinstance(job_id, str) else keys.results_key("").encode() + job_id)


def raw_delete(connection, queue_name, job_id):
    """DEL a corrupt job's hash and results, and take its id off ``queue_name``'s list and
    registries (a key of the wrong type is left alone). True when the hash was there."""
    job_id = normal_id(job_id)
    with connection.pipeline(transaction=False) as pipe:
        delete_keys(pipe, job_id)
        for band_key in keys.band_keys(keys.queue_key(queue_name)):  # a corrupt job has no readable band
            pipe.lrem(band_key, 0, job_id)
        for registry_key in registry_keys(queue_name):
            pipe.zrem(registry_key, job_id)
        replies = pipe.execute(raise_on_error=False)
    return replies[0] == 1


def registry_keys(queue_name):
    """The sorted-set registries of ``queue_name`` that hold plain job ids."""

    return [
        keys.failed_key(queue_name),
        keys.finished_key(queue_name),
        keys.scheduled_key(queue_name),
        DeferredJobRegistry.key_template.format(queue_name),
        CanceledJobRegistry.key_template.format(queue_name),
    ]
