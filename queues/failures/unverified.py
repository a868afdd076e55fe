"""Unverified dead letters: failed-registry jobs whose signature does not verify (reason ``unverified``).

The worker's gate (``queues/jobs/gate.py``) refuses a popped job that is not signed (``unsigned``),
but a failed registry is written to as well: anyone who can write to the queues' Redis can plant a
hash that looks dead (status ``failed``, meta ``dead: exhausted``, a real-looking error) and ZADD it
there. ``reconcile`` copies failed jobs into the DeadLetter table; it checks the signature first
(``verified``, the keys the gate uses) and mirrors one that does not verify with ``unverified_values``:
its function and arguments kept, to be shown, and nothing its meta claims believed.

Neither an ``unverified`` nor an ``unsigned`` row is retried by a bulk or group action: only one at a
time, once an operator confirmed the function and arguments shown (``queues/failures/operations.py``).
"""

from queues.failures.corrupt import encode_raw_hash
from queues.failures.fingerprint import fingerprint
from queues.failures.mirror import now
from queues.jobs import signing

UNVERIFIED = "unverified"
UNVERIFIED_TYPE = "UnverifiedJob"  # its exc_type: why it failed is unknown (its meta is not believed)
UNVERIFIED_MESSAGE = (
    "Unverified: found in a failed registry without a valid signature (not written by queues.enqueue with "
    "this deployment's QUEUE_SIGNING_KEY or an old key). Its function and arguments were not verified, and "
    "why it failed is unknown: the reason and the error its meta claims were not believed (its Redis hash "
    "is kept as it was)."
)


def verified(job):
    """Whether ``job`` carries a valid signature of the current key or an old one; never raises (a
    planted signature that is not ASCII hex is unverified, not an error)."""
    try:
        return signing.verify(job)
    except Exception:  # noqa: BLE001 — whatever the planted bytes were
        return False


def unverified_values(queue, values, raw_hash):
    """``values`` (``mirror.row_values`` of a job found in ``queue``'s failed registry) made those of
    an ``unverified`` dead letter: its function and arguments kept (a one-row retry shows them before
    it runs them); its reason, error, traceback, attempts, worker, times, owner and limit key (all
    read from what was planted) replaced; its hash as HGETALL gave it (``raw_hash``) kept."""
    at = now()
    values.update(
        queue=queue[:200],
        reason=UNVERIFIED,
        exc_type=UNVERIFIED_TYPE,
        exc_message=UNVERIFIED_MESSAGE,
        traceback="",
        attempts_made=0,
        attempts_allowed=0,
        enqueued_at=None,
        first_failed_at=at,
        dead_at=at,
        worker="",
        times_dead=1,
        carried="",
        raw_hash=encode_raw_hash(raw_hash),
        fingerprint=fingerprint(values["func_path"], UNVERIFIED_TYPE, UNVERIFIED_MESSAGE),
    )
    return values
