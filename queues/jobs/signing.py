"""Signed jobs: an HMAC over what a job will run, so that writing to Redis is not enough to run it.

Whoever can write to the queues' Redis could otherwise queue a *declared* job with hostile
arguments (a repricer job at 0.01). Every job written by ``queues.enqueue`` (the schedulers and the
admin go through it, or requeue a job that already carries its signature) stores in its hash field
``signature`` (``OptimaJob``; not in the meta, which jobs rewrite) the HMAC-SHA256 over

    job id, the job's ``data`` exactly as stored (function, arguments), its callback names

keyed with ``QUEUE_SIGNING_KEY`` (default: derived from ``SECRET_KEY`` with Django's
``salted_hmac`` salt convention, so one secret to rotate). The worker checks it before anything
of the job is imported (queues/jobs/gate.py); a missing or wrong signature dead-letters the job as
``unsigned``. Key rotation: the new key signs, the keys of ``QUEUE_SIGNING_OLD_KEYS`` still verify.

The signed message is the serialized ``data`` bytes themselves, not a re-serialization: the worker
verifies what it will decode, and no canonical form has to agree between versions.

Rolling out signing over queues that hold unsigned jobs: ``QUEUE_ACCEPT_UNSIGNED_UNTIL`` (an ISO
8601 time, UTC when no offset) lets unsigned jobs run until then. A job's own ``enqueued_at`` can
be forged, so the window itself is the exposure: the check is the worker's clock, not the job's.

Why not ``django.core.signing``: it signs text it then carries (``value:signature``); here the
value already lives in the job hash, and only the 64-hex-digit MAC is added to it.
"""

import datetime as dt
import hashlib
import hmac

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from queues import rqcompat
from queues.conf import Problem

_SALT = b"optima.queues.signing"  # never change it: every signed job in Redis was signed with it (not a module path)

_keys = None  # (signing key, *verifying keys) as bytes, built once per settings


def _derive(secret):
    secret = secret.encode() if isinstance(secret, str) else bytes(secret)
    return hashlib.sha256(_SALT + b"\0" + secret).digest()


def keys():
    global _keys
    if _keys is None:
        primary = getattr(settings, "QUEUE_SIGNING_KEY", "") or settings.SECRET_KEY
        old = getattr(settings, "QUEUE_SIGNING_OLD_KEYS", ()) or ()
        if isinstance(old, str):
            old = [k for k in old.split(",") if k.strip()]
        fallbacks = (
            ()
            if getattr(settings, "QUEUE_SIGNING_KEY", "")
            else tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ())
        )
        _keys = tuple(_derive(k) for k in (primary, *old, *fallbacks))
    return _keys


@receiver(setting_changed)
def _forget_keys(setting=None, **kwargs):
    global _keys, _accept_until
    if setting in (
        "QUEUE_SIGNING_KEY",
        "QUEUE_SIGNING_OLD_KEYS",
        "SECRET_KEY",
        "SECRET_KEY_FALLBACKS",
        "QUEUE_ACCEPT_UNSIGNED_UNTIL",
    ):
        _keys = None
        _accept_until = _UNSET


def _message(job_id, data, callbacks):
    parts = [b"optima-job-v1", job_id.encode() if isinstance(job_id, str) else job_id, data]
    parts.extend((name or "").encode() for name in callbacks)
    return b"\0".join(parts)


def _mac(key, message):
    return hmac.new(key, message, hashlib.sha256).hexdigest()


_signer = None  # (key, an HMAC keyed with it, copied per job: the key schedule is computed once)


def _sign_bytes(message):
    global _signer
    key = keys()[0]
    if _signer is None or _signer[0] is not key:
        _signer = (key, hmac.new(key, digestmod=hashlib.sha256))
    mac = _signer[1].copy()
    mac.update(message)
    return mac.hexdigest()


def callbacks_of(job):
    return rqcompat.callback_names(job)


def sign(job):
    """The signature of an rq Job about to be written (its ``data`` is built and kept)."""
    return _sign_bytes(_message(job.id, job.data, callbacks_of(job)))


def verify(job):
    """True when the job carries a signature of any current key over what it will run."""
    signature = getattr(job, "signature", "")
    if not signature or not isinstance(signature, str) or not signature.isascii():
        return False  # hmac.compare_digest raises TypeError on a str that is not ASCII
    message = _message(job.id, job.data, callbacks_of(job))
    return any(hmac.compare_digest(_mac(key, message), signature) for key in keys())


_UNSET = object()
_accept_until = _UNSET


def accept_unsigned_until():
    """The aware datetime of ``QUEUE_ACCEPT_UNSIGNED_UNTIL``, or None (unsigned jobs never run)."""
    global _accept_until
    if _accept_until is _UNSET:
        _accept_until = parse_until(getattr(settings, "QUEUE_ACCEPT_UNSIGNED_UNTIL", "") or "")
    return _accept_until


def parse_until(value):
    """'' -> None; ISO 8601 -> aware datetime (UTC if no offset); ValueError otherwise."""
    if isinstance(value, dt.datetime):
        parsed = value
    elif not value:
        return None
    else:
        parsed = dt.datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def unsigned_accepted(now=None):
    until = accept_unsigned_until()
    return until is not None and (now or dt.datetime.now(dt.UTC)) < until


MIN_KEY_LENGTH = 32
LONG_WINDOW = dt.timedelta(days=7)


def validate(now=None):
    """queues.E026: QUEUE_ACCEPT_UNSIGNED_UNTIL is not an ISO time; queues.W027: it is more than 7
    days ahead (every such day anyone who can write to Redis can run any declared job with any
    arguments); queues.E028: QUEUE_SIGNING_KEY (or an old key) is set but shorter than 32 characters."""

    problems = []
    raw = getattr(settings, "QUEUE_ACCEPT_UNSIGNED_UNTIL", "") or ""
    try:
        until = parse_until(raw)
    except (TypeError, ValueError):
        until = None
        problems.append(
            Problem(
                "queues.E026",
                f"QUEUE_ACCEPT_UNSIGNED_UNTIL is {raw!r}, which is not an ISO 8601 time.",
                "E.g. QUEUE_ACCEPT_UNSIGNED_UNTIL=2026-12-01T12:00:00Z (UTC when no offset), or "
                "unset it: unsigned jobs then never run.",
            )
        )
    now = now or dt.datetime.now(dt.UTC)
    if until is not None and until - now > LONG_WINDOW:
        problems.append(
            Problem(
                "queues.W027",
                f"QUEUE_ACCEPT_UNSIGNED_UNTIL is {raw!r}, more than 7 days ahead: until "
                "then, anyone who can write to the queues' Redis can run any declared job with any "
                "arguments.",
                "Set it to just after the jobs queued before signing was deployed "
                "will have run (their longest delay or retry), then unset it.",
                level="warning",
            )
        )
    old = getattr(settings, "QUEUE_SIGNING_OLD_KEYS", ()) or ()
    old = old.split(",") if isinstance(old, str) else old
    for name, value in [("QUEUE_SIGNING_KEY", getattr(settings, "QUEUE_SIGNING_KEY", "") or "")] + [
        (f"QUEUE_SIGNING_OLD_KEYS[{i}]", k) for i, k in enumerate(old)
    ]:
        if value and len(str(value)) < MIN_KEY_LENGTH:
            problems.append(
                Problem(
                    "queues.E028",
                    f"{name} is {len(str(value))} characters long; a signing key needs at least {MIN_KEY_LENGTH}.",
                    "A long random value: python -c 'import secrets; print(secrets.token_urlsafe(48))'; "
                    "or unset QUEUE_SIGNING_KEY to derive the key from SECRET_KEY.",
                )
            )
    return problems
