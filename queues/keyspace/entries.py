"""Entries read from Redis that a reader cannot use: reported once and skipped; and the size caps.

Whoever can write to the queues' Redis can plant anything under any key (``keys.py`` lists the
families and the reader of each). A reader never raises for what it finds: an entry it cannot use
is reported by ``report`` (one ERROR per entry and process, its key and why escaped and masked)
and skipped, or shown as corrupt. What is read is bounded, and so is what is kept from it:

===============================  ==========  ==============================================================
cap                              value       what happens past it
===============================  ==========  ==============================================================
``JOB_BYTES``                    256 KiB     a job hash (its ``data`` decompressed) this large reads as a
                                             corrupt job "too large" (``jobs/read.py``): shown as its
                                             fields cut at ``PREVIEW_CHARS``, never decompressed whole
``READ_BYTES``                   512 KiB     a job hash larger than this as stored is not read whole at
                                             all: Redis sends its first ``RAW_FIELDS`` fields by name, each
                                             name and value cut at ``RAW_VALUE_BYTES`` (``Cut``), a value
                                             over 64 KiB not read at all, only its length
                                             (``jobs/capped.py``)
``JOB_FIELDS``                   1,024       a job hash with more fields is read the same way (rq's have ~30)
``RUN_BYTES``                    16 MiB      a job whose ``data`` (its function and arguments, serialized) is
                                             larger is refused by ``queues.enqueue`` (``InvalidJob``); one
                                             planted in Redis is refused by the worker as corrupt "too large to
                                             run", never inflated past the cap (a zlib bomb stays small), and
                                             a hash over ``RUN_STORED_BYTES`` as stored never crosses the wire
                                             to the worker whole (``too_large``; RabbitMQ 4's
                                             default largest message is the same 16 MiB)
``RESULT_BYTES``                 256 KiB     a result's return value this large (base64) is shown as
                                             ``"(… bytes: not shown)"`` (``jobs/results.py``)
``TEXT_CHARS``                   64 KiB      a traceback, an exception message, a result's exception
                                             string: cut, with ``TRUNCATED`` and the size it had
``ARGS_CHARS``                   64 KiB      a dead letter's arguments as JSON: past it the row keeps
                                             ``TRUNCATED_ARGS`` instead (``failures/mirror.py``)
``RAW_VALUE_BYTES``              2 KiB       each name and value kept in a corrupt dead letter's
                                             ``raw_hash`` (``failures/corrupt.py``), cut inside valid JSON
``RAW_FIELDS``                   64          fields kept in a ``raw_hash``
``PREVIEW_CHARS``                300         characters shown of each value of a corrupt job's hash
``HISTORY_BYTES``                4 KiB       a history sample longer than this is skipped
``WORKER_QUEUES_BYTES``          16 KiB      a worker hash whose queue list is longer reads as no worker (rq
                                             would build a queue per name): left out of the panel, reported
``ID_CHARS``                     200         a job id longer than this (rq takes any length) is no job id
                                             here, as for the API and the dead-letter table: the workers
                                             drop it from a queue, the readers show it corrupt and cut
===============================  ==========  ==============================================================

A NUL character (U+0000), which PostgreSQL cannot store in text or jsonb, is kept in the database as
the four characters ``\\x00`` (``without_nul``; ``queues/models.py`` applies it to every row it saves, and a
dead letter that held one says so at the end of its message).

So a 50 MB value costs kilobytes in the database and in a page. Reported entries are remembered
(at most ``MAX_REPORTED`` per process), so a page that meets the same bad entry at every load logs
it once; past ``MAX_REPORTED`` distinct ones, a key is one line a minute with a count (``repeats``). It imports only
``logsafe``, the URL masking and ``repeats``.
"""

import zlib

from rq.exceptions import NoSuchJobError

from queues import logsafe
from queues.connection.masking import mask_urls_in
from queues.keyspace import repeats

JOB_BYTES = 256 * 1024
READ_BYTES = 2 * JOB_BYTES  # as stored: zlib never makes ``data`` larger by half, so no hash under JOB_BYTES is cut
JOB_FIELDS = 1024
RUN_BYTES = 16 * 1024 * 1024
RUN_STORED_BYTES = 2 * RUN_BYTES  # a job hash as stored: its data (zlib never larger by half), its meta and the rest
RESULT_BYTES = 256 * 1024
TEXT_CHARS = 64 * 1024
ARGS_CHARS = 64 * 1024
RAW_VALUE_BYTES = 2 * 1024
RAW_FIELDS = 64
PREVIEW_CHARS = 300
HISTORY_BYTES = 4 * 1024
ID_CHARS = 200
WORKER_QUEUES_BYTES = 16 * 1024

TRUNCATED = "… (truncated: {size} in all, the first {kept} kept)"
MAX_REPORTED = 1000

logger = logsafe.get_logger("queues.resilience")  # the logger that names bad entries set aside, too

_reported: set[tuple[str, str]] = set()


def report(key, why, log=logger):
    """One ERROR per bad entry (``key``, ``why``) and process: "<key>: <why>; skipped", for the first
    ``MAX_REPORTED``; past them, two lines a minute per key at most, with a count (``repeats``). Each is
    counted in /metrics (``optima_quarantined_entries_total{kind="bad_entry"}``).
    URLs in them are masked and control characters escaped (a key or a value may hold a line break):
    by the logger's own filter when it has one (``logsafe.get_logger``), else here."""

    key, why = mask_urls_in(text(key)), mask_urls_in(text(why))
    if not any(isinstance(f, logsafe.EscapeControlCharacters) for f in log.filters):
        key, why = logsafe.escape(key), logsafe.escape(why)  # a plain logger: escaped here, once
    if (key, why) in _reported:
        return
    message = "bad entry in Redis: %s: %s; skipped (shown as corrupt or left out)"
    if len(_reported) < MAX_REPORTED:  # each of the first entries named: what an operator looks for
        _reported.add((key, why))
        repeats.count(repeats.BAD_ENTRY)
        log.error(message, key, why)
    else:  # past them, a line a minute per key with a count
        repeats.report(repeats.BAD_ENTRY, key, message, key, why, log=log)


NUL = "\x00"
NUL_SHOWN = "\\x00"  # the four characters a NUL (U+0000) is stored as: PostgreSQL's text and jsonb refuse it


def without_nul(value):
    """``value`` with every NUL character (U+0000) of its strings replaced by the text ``\\x00``
    (``NUL_SHOWN``): in a str, or anywhere in JSON-like lists and dicts (keys too). -> (value, changed).
    PostgreSQL cannot store a NUL in a text column nor in jsonb (``DataError``), and a marketplace
    response inside an exception message may hold one."""
    if isinstance(value, str):
        return (value.replace(NUL, NUL_SHOWN), True) if NUL in value else (value, False)
    if isinstance(value, list | tuple):
        pairs = [without_nul(item) for item in value]
        return (type(value)(v for v, _ in pairs), True) if any(c for _, c in pairs) else (value, False)
    if isinstance(value, dict):
        pairs = [(without_nul(k), without_nul(v)) for k, v in value.items()]
        if not any(kc or vc for (_, kc), (_, vc) in pairs):
            return value, False
        return {k: v for (k, _), (v, _) in pairs}, True
    return value, False


def text(value):
    """``value`` (bytes or str) as text: bytes that are not UTF-8 shown as ``\\xNN``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value if isinstance(value, str) else str(value)


def cut(value, limit=TEXT_CHARS):
    """``value`` (str) cut to ``limit`` characters, with a visible marker saying so."""
    if value is None or len(value) <= limit:
        return value
    return value[:limit] + TRUNCATED.format(size=f"{len(value)} characters", kept=limit)


class Cut(bytes):
    """The first bytes of a value that Redis cut before sending it (``jobs/capped.py``); ``size`` is the
    length the value has there. Everything that cuts or measures a value reads ``size_of`` it."""

    size: int

    def __new__(cls, head, size):
        value = super().__new__(cls, head)
        value.size = size
        return value


def size_of(value):
    """The length of ``value`` (bytes or str) where it came from: ``Cut.size`` for a value cut in Redis."""
    return value.size if isinstance(value, Cut) else len(value)


def cut_bytes(value, limit):
    """``value`` (bytes) cut to ``limit`` bytes, with the marker (as bytes) saying so."""
    size = size_of(value)
    if size <= limit:
        return value
    kept = value[:limit]  # a value cut in Redis may hold less (none of one too large to read: ``Cut``)
    return kept + TRUNCATED.format(size=f"{size} bytes", kept=len(kept)).encode()


def inflate(data, limit):
    """``data`` zlib-decompressed, at most ``limit`` bytes of it: (bytes, whole). ``whole`` is False
    when more would have come (never decompressed past the limit: a small bomb stays small).
    Raises ``zlib.error`` when ``data`` is not zlib."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit + 1)
    if not inflater.unconsumed_tail:
        out += inflater.flush()
    whole = len(out) <= limit and not inflater.unconsumed_tail
    return out[:limit], whole


class TooLarge(NoSuchJobError):
    """A job hash too large to run (``too_large``), raised by ``OptimaJob.restore`` before rq inflates its ``data``: a
    ``NoSuchJobError``, so ``OptimaJob.fetch_many`` (a success's dependents, rq's ``Queue.move_dependents_to_ready``)
    reads it as no job; the worker's intake dead-letters it as corrupt (``worker/intake.py``). ``str()``: why."""


ZLIB_MAX_RATIO = 1032  # deflate's largest expansion (zlib's technical details): a byte inflates to at most this many


def too_large(fields):
    """Why a popped job's hash (as read: {bytes: bytes}) is too large to run, or None. Asked before rq's
    ``Job.restore``, which inflates ``data`` whole: a few kilobytes of zlib planted in Redis inflate to gigabytes
    (a "zip bomb"), and a worker killed for its memory would leave the job to the abandoned-job scan, to kill the
    next worker. Here ``data`` is inflated no further than ``RUN_BYTES`` (``queues.enqueue`` refuses a
    larger job: none it wrote is refused here), and a hash of more fields than ``JOB_FIELDS`` or more bytes
    than ``RUN_STORED_BYTES`` is refused as read (the pop does not even send it: ``popscript.POP_LUA``)."""
    why = too_large_hash(len(fields), sum(len(name) + len(value) for name, value in fields.items()))
    if why is not None:
        return why
    data = fields.get(b"data")
    if data and len(data) * ZLIB_MAX_RATIO > RUN_BYTES:  # else it cannot inflate past the cap: not tried
        try:
            whole = inflate(data, RUN_BYTES)[1]
        except zlib.error:  # not zlib: rq reads it as it is
            whole = len(data) <= RUN_BYTES
        if not whole:
            return f"is too large to run: its data inflates past {RUN_BYTES} bytes"
    return None


def too_large_hash(count, size):
    """Why a job hash of ``count`` fields and ``size`` bytes as stored (-1: not summed) is too large to run, or None:
    ``too_large``'s first look, and ``capped.Oversized.why_to_run``'s, so that both say it alike."""
    if count > JOB_FIELDS:
        return f"is too large to run: its hash has {count} fields (at most {JOB_FIELDS})"
    if size > RUN_STORED_BYTES:
        return f"is too large to run: its hash holds {size} bytes (at most {RUN_STORED_BYTES})"
    return None
