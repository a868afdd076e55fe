"""Corrupt dead letters: jobs whose Redis hash cannot be read as a job (reason ``corrupt``).

Nothing in such a hash is decoded or run. ``bury_corrupt`` puts the job's id in its queue's failed
registry with no expiry, leaves the hash exactly as it was, and keeps it in the row's ``raw_hash``
(``encode_raw_hash``: JSON text, lossless up to the size caps of ``queues/keyspace/entries.py``) for the admin to
show escaped (``decode_raw_hash``); the message (``why``) is cut at ``entries.TEXT_CHARS``.
Retrying such a row is refused (``queues.failures.operations``); discarding it works like any other.
"""

import base64
import json
import logging

from django.db import IntegrityError, transaction

from queues import conf
from queues.failures.fingerprint import fingerprint
from queues.failures.mirror import count_death, now
from queues.jobs import read as jobread
from queues.keyspace import entries, keys, repeats
from queues.models import DeadLetter

logger = logging.getLogger("queues.deadletter")  # a documented logger name: kept when the module moved

CORRUPT = "corrupt"


def encode_raw_hash(fields, count=None):
    """A job hash as read (bytes -> bytes; ``jobs/capped.py``) -> JSON text ``[[field, value], ...]``, every
    name and value base64-encoded: storable in any text column, and lossless up to the caps of
    ``queues/keyspace/entries.py``: each name and value cut at ``RAW_VALUE_BYTES`` bytes, ending with a visible
    "… (truncated: N bytes in all, …)", at most ``RAW_FIELDS`` fields, then one ``…`` field saying how
    many more there were (``count``: the fields the hash has, when ``fields`` holds only its first ones).
    Still valid JSON that ``decode_raw_hash`` reads."""
    pairs = sorted((fields or {}).items())
    count = len(pairs) if count is None else count
    kept = [
        (entries.cut_bytes(k, entries.RAW_VALUE_BYTES), entries.cut_bytes(v, entries.RAW_VALUE_BYTES))
        for k, v in pairs[: entries.RAW_FIELDS]
    ]
    if count > len(kept):
        kept.append(("…".encode(), f"(truncated: {count - len(kept)} more fields not kept)".encode()))
    return json.dumps([[base64.b64encode(k).decode(), base64.b64encode(v).decode()] for k, v in kept])


def decode_raw_hash(text):
    """The inverse of ``encode_raw_hash``: [(field bytes, value bytes), ...] ([] for '')."""
    return [(base64.b64decode(k), base64.b64decode(v)) for k, v in (json.loads(text) if text else [])]


def bury_corrupt(connection, job_id, queue_name, fields, why, worker_name="", count=None):
    """Dead-letter a job whose hash cannot be read as a job (reason ``corrupt``; ``job_id`` as
    ``jobread.shown_id`` shows it, the row's ``job_id``): its id as Redis holds it goes into
    its queue's failed registry with no expiry (its hash is left exactly as it was, nothing in it
    decoded), and its row keeps the raw hash (``encode_raw_hash``). Never raises for the database
    (logged; reconcile catches up). Returns the row or None."""

    prefix = conf.prefix()
    # ``job_id`` as pages show it (``jobread.shown_id``, the row's too); Redis holds it raw ("a/b").
    raw = jobread.normal_id(job_id)
    connection.zadd(keys.failed_key(queue_name), {raw: "+inf"})
    repeats.report(
        repeats.CORRUPT,
        keys.failed_key(queue_name),
        "Job %s (%s) is dead (corrupt): its hash %s %s",
        job_id,
        queue_name,
        jobread.text(jobread.job_key(raw)),
        why,
        log=logger,
        connection=connection,
    )
    at = now()
    values = {
        "queue": queue_name[:200],
        "func_path": "<corrupt job>",
        "args": [],
        "kwargs": {},
        "exc_type": "CorruptJob",
        "exc_message": entries.cut(why),
        "traceback": "",
        "attempts_made": 0,
        "attempts_allowed": 0,
        "reason": CORRUPT,
        "enqueued_at": None,
        "first_failed_at": at,
        "dead_at": at,
        "worker": worker_name[:300],
        "times_dead": 1,
        "raw_hash": encode_raw_hash(fields, count),
        "fingerprint": fingerprint("<corrupt job>", "CorruptJob", why),
    }
    try:
        for attempt in range(2):
            try:
                with transaction.atomic():  # the row and its group together
                    row = DeadLetter.objects.select_for_update().filter(prefix=prefix, job_id=job_id).first()
                    if row is None:
                        row = DeadLetter.objects.create(prefix=prefix, job_id=job_id, **values)
                        count_death(row, 1)
                    elif row.status != DeadLetter.Status.OPEN or row.reason != CORRUPT:
                        for key, value in values.items():
                            setattr(row, key, value)
                        row.status = DeadLetter.Status.OPEN
                        row.save()
                        count_death(row, 1)
                    return row
            except IntegrityError:
                if attempt:  # a concurrent bury created the row or the group: once more over theirs
                    raise
    except Exception:  # noqa: BLE001 — the worker must go on whatever the database does
        logger.exception("Could not mirror corrupt job %s into the DeadLetter table", job_id)
        return None
