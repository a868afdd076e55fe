"""The audit trail: one ``AuditEntry`` row per operator action on one object.

Every change an operator makes — retry or discard a dead letter, pause or resume a queue, requeue,
delete, stop or empty from the panel (django-rq's own views included) — goes through ``record``.
Who acted is the Django user when there is one, else the identity the panel's access check
established (``basic:<user>`` for the shared basic-auth account, ``anonymous (OPTIMA_ENV=dev)``
where the panel is open). The row is written in its own transaction, so a failed action still
leaves its ``error`` row behind.

The log line of each row goes through ``queues.logsafe``: queue names, job ids, identities and
details come from requests, and their control characters are escaped (no forged lines).
"""

from django.db import transaction

from queues import conf
from queues.logsafe import get_logger
from queues.models import AuditEntry

logger = get_logger("queues.audit")  # a documented logger name: kept when the module moved

# Queue-wide actions can touch 200,000 jobs: a row keeps the first ids, the detail says how many.
MAX_JOB_IDS = 1000


def identity_of(request_or_identity):
    """(identity string, Django user or None) for a request, a user or an identity string."""
    value = request_or_identity
    if isinstance(value, str):
        return value, None
    access = getattr(value, "queue_access", None)
    if access is not None:
        return access.identity, access.user
    user = getattr(value, "user", value)
    if getattr(user, "is_authenticated", False) and getattr(user, "pk", None) is not None:
        return user.get_username(), user
    return "anonymous", None


def record(request_or_identity, action, queue="", job_ids=(), outcome="ok", detail=""):
    """Write and return one audit row.

    ``request_or_identity``: the HttpRequest of the action (preferred), a user, or an identity
    string for actions without a request. ``outcome``: ``ok``, ``partial`` or ``error``.
    """

    identity, user = identity_of(request_or_identity)
    job_ids = [str(j) for j in job_ids]
    if len(job_ids) > MAX_JOB_IDS:
        detail = f"{detail} ({len(job_ids)} jobs in all; the first {MAX_JOB_IDS} ids are listed)".strip()
        job_ids = job_ids[:MAX_JOB_IDS]
    with transaction.atomic():
        entry = AuditEntry.objects.create(
            user=user,
            identity=identity[:200],
            action=action,
            queue=queue or "",
            job_ids=job_ids,
            outcome=outcome,
            detail=detail,
            prefix=conf.prefix(),
        )
    log = logger.warning if outcome != AuditEntry.Outcome.OK else logger.info
    log(
        "audit: %s %s queue=%s jobs=%s outcome=%s %s",
        identity,
        action,
        queue or "-",
        ",".join(job_ids[:5]) + ("..." if len(job_ids) > 5 else ""),
        outcome,
        detail,
    )
    return entry
