"""What every feature endpoint shares: access, owners, the 202/400/404/413/503 answers, job status.

A feature view validates its JSON body with a serializer, enqueues with ``self.enqueue_job`` (the
caller recorded as the job's owner) and answers through ``EnqueueView``:

- 400 ``{"detail", "errors": [{"field", "value", "messages"}]}`` on a bad body, naming each field
  and the value it got;
- 202 ``{"job_id", "queue", "status_url"}`` (and a ``Location`` header) once the job is enqueued;
- 404 ``{"detail"}`` for a cabinet or product the caller does not own (``features/sellers/owners.py``);
- 413 ``{"detail", "limit_bytes"}`` for a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``;
- 503 ``{"detail"}`` with ``Retry-After`` when the queues' Redis is unavailable — nothing enqueued.

No body answers 500: ``features/parsers.py`` refuses what JSON parsing would choke on, and a value
echoed in a 400 goes through ``features.redaction.shown``.

Access (``features/permissions.py``): session or token authentication, except in dev
(``OPTIMA_ENV=dev``, read per request). Owners (``features/sellers/owners.py``): a job records who
enqueued it, and its status answers that owner and staff with the queue panel's view permission.
"""
import logging
import re

import redis
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import JsonResponse
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.response import Response
from rest_framework.views import APIView

import queues
from features.fields import MoneyField, StrictCharField, StrictIntegerField, StrictRegexField  # noqa: F401 (API)
from features.parsers import SafeJSONParser
from features.redaction import public_error, shown
from features.sellers import owners

logger = logging.getLogger(__name__)

UNAVAILABLE_RETRY_AFTER = 5  # seconds a client is told to wait after a 503
JOB_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,200}")


# --- response shapes (used by the views and by the OpenAPI schema) -------------------------------
class JobAcceptedSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    queue = serializers.CharField()
    status_url = serializers.CharField(help_text="GET it for the job's state, progress and result")


class FieldErrorSerializer(serializers.Serializer):
    field = serializers.CharField()
    value = serializers.JSONField(allow_null=True, help_text="what the request sent (null: missing)")
    messages = serializers.ListField(child=serializers.CharField())


class ValidationErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    errors = FieldErrorSerializer(many=True)


class DetailSerializer(serializers.Serializer):
    detail = serializers.CharField()


class TooLargeSerializer(serializers.Serializer):
    detail = serializers.CharField()
    limit_bytes = serializers.IntegerField(help_text="the largest body accepted, in bytes")


class JobConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    state = serializers.CharField(help_text="the job's state: started, finished, failed, stopped, canceled, ...")


class HeldBySerializer(serializers.Serializer):
    key = serializers.CharField(help_text="the limit key, e.g. owner:7")
    concurrency = serializers.IntegerField(help_text="jobs of the key that may be queued or running at once")
    in_use = serializers.IntegerField(help_text="jobs of the key queued or running now")
    held = serializers.IntegerField(help_text="jobs of the key held now")
    ahead = serializers.IntegerField(allow_null=True, help_text="held jobs of the key before this one (null: "
                                                                "not held)")


class JobStatusSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    queue = serializers.CharField(allow_null=True)
    state = serializers.CharField(help_text="outbox (accepted, not yet in Redis), queued, scheduled, held (waiting "
                                            "for a slot of its limit key), started, finished, failed, stopped, "
                                            "canceled")
    attempt = serializers.IntegerField(allow_null=True)
    attempts_allowed = serializers.IntegerField(allow_null=True)
    progress = serializers.JSONField(allow_null=True)
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True, help_text="last line of the last failure")
    dead_reason = serializers.CharField(
        allow_null=True, help_text="why it is in the dead letter: exhausted, permanent, timeout, abandoned, stopped; "
                                  "refused without running: not_a_job, unsigned, corrupt"
    )
    held_by = HeldBySerializer(allow_null=True, help_text="the job's limit key while it is held, queued or running; "
                                                          "null without one")
    enqueued_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    ended_at = serializers.DateTimeField(allow_null=True)


ERROR_RESPONSES = {
    400: OpenApiResponse(ValidationErrorSerializer, description="The body is not valid; every bad field is named."),
    401: OpenApiResponse(DetailSerializer, description="Not authenticated (outside dev)."),
    403: OpenApiResponse(DetailSerializer, description="Not allowed."),
    404: OpenApiResponse(DetailSerializer, description="No such cabinet or product among the caller's."),
    413: OpenApiResponse(TooLargeSerializer, description="The body is larger than the limit."),
    415: OpenApiResponse(DetailSerializer, description="The body is not JSON."),
    503: OpenApiResponse(DetailSerializer, description="The queues are unavailable; nothing was enqueued."),
}


def enqueue_schema(request_serializer, summary):
    return extend_schema(
        request=request_serializer,
        responses={202: OpenApiResponse(JobAcceptedSerializer, description="Enqueued."), **ERROR_RESPONSES},
        summary=summary,
    )


def validation_error(serializer, data):
    errors = []
    for field, messages in serializer.errors.items():
        if field == "non_field_errors":
            field = "(body)"
            value = shown(data)
        else:
            value = shown(data.get(field)) if isinstance(data, dict) else None
        if not isinstance(messages, list):
            messages = [str(messages)]
        errors.append({"field": field, "value": value, "messages": [str(m) for m in messages]})
    detail = "Invalid request body: " + "; ".join(
        f"{e['field']}={e['value']!r}: {' '.join(e['messages'])}" for e in errors
    )
    return Response({"detail": detail, "errors": errors}, status=status.HTTP_400_BAD_REQUEST)


def queue_unavailable(exc):
    logger.warning("enqueue refused, queues unavailable: %s", exc)
    return Response(
        {"detail": "The job queue is unavailable right now, so nothing was enqueued. Try again in a few seconds."},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
    )


def accepted(job, queue):
    url = reverse("features:job-status", args=[job.id])
    return Response(
        {"job_id": job.id, "queue": queue, "status_url": url}, status=status.HTTP_202_ACCEPTED, headers={"Location": url}
    )


def body_error(detail):
    """400 in the validation shape, for a body that is not a JSON we can read at all."""
    return Response({"detail": f"Invalid request body: {detail}",
                     "errors": [{"field": "(body)", "value": None, "messages": [detail]}]},
                    status=status.HTTP_400_BAD_REQUEST)


class FeatureView(APIView):
    """What every feature endpoint shares: the safe JSON parser, and JSON answers to bad bodies."""

    parser_classes = [SafeJSONParser]

    def handle_exception(self, exc):
        if isinstance(exc, ParseError):  # not JSON at all: the same 400 shape as a bad field
            return body_error(str(exc.detail))
        if isinstance(exc, RequestDataTooBig):  # Django's would be an HTML 400
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return Response({"detail": f"The request body is larger than the limit of {limit} bytes.",
                             "limit_bytes": limit}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        if isinstance(exc, SuspiciousOperation):  # too many form fields or files, and the like
            return body_error(f"{type(exc).__name__}: the request is not acceptable.")
        return super().handle_exception(exc)


class EnqueueView(FeatureView):
    """Base of the feature POST endpoints: subclasses set ``serializer_class`` and ``enqueue(data)``.

    ``enqueue`` returns ``(job, queue_name)``; raising ``queues.QueueUnavailable`` answers 503.
    Inside it, ``self.cabinet(id)`` / ``self.product(id)`` give the caller's own row or answer 404,
    and ``self.enqueue_job(...)`` enqueues with the caller recorded as the job's owner and
    ``unique=`` scoped to that owner.
    """

    serializer_class = None

    def enqueue(self, data):
        raise NotImplementedError

    @property
    def owner(self):
        return owners.owner_of(self.request)

    def cabinet(self, cabinet_id):
        return owners.owned_cabinet(self.owner, cabinet_id)

    def product(self, product_id):
        return owners.owned_product(self.owner, product_id)

    def enqueue_job(self, queue, func, *args, unique=None, **options):
        """``queues.enqueue_call`` with ``meta["owner"]`` set, ``unique`` made this owner's own, and the
        job under the owner's limit key (``limit_key="owner:<id>"``; the queue's ``limit_concurrency``
        option says how many of one owner's jobs may be queued or running at once), so that one
        seller's flood never starves the others. A queue without that option has no limit."""
        owner = self.owner
        if "limit_key" not in options and queues.get_queue(queue).config.options.get("limit_concurrency"):
            options["limit_key"] = f"owner:{owner.key}"
        # durable: accepted through the outbox even while Redis is down (202, not 503); a unique
        # enqueue still asks Redis first whether the same key's job is waiting (503 while it is down).
        options.setdefault("durable", True)
        return queues.enqueue_call(queue, func, args, unique=owners.scoped(owner, unique) if unique else None,
                                   meta=owners.job_meta(owner), **options)

    def post(self, request):
        data = request.data
        serializer = self.serializer_class(data=data)
        if not serializer.is_valid():
            return validation_error(serializer, data)
        try:
            job, queue = self.enqueue(serializer.validated_data)
        except queues.QueueUnavailable as exc:
            return queue_unavailable(exc)
        return accepted(job, queue)


def job_status(job):
    from queues.producer import limits

    state = job.get_status(refresh=False)
    state = getattr(state, "value", state)
    meta = job.meta or {}
    if state == limits.HELD:
        state = "held"  # rq's "rate_limited": waiting outside the queue for a slot of its limit key
    held_by = None
    if state in ("held", "queued", "started"):
        hold = limits.hold_of(job)  # None without a limit key
        held_by = hold.as_dict() if hold is not None else None
    result = error = None
    if state == "finished":
        result = job.return_value()
    elif state == "failed" or meta.get("last_failed_at"):
        # Dead, or a retry waiting for its backoff: the last attempt's error either way.
        latest = job.latest_result()
        exc_string = getattr(latest, "exc_string", None) if latest is not None else None
        error = public_error(exc_string)  # class and message, no internal URL or secret
    return {
        "job_id": job.id,
        "queue": meta.get("queue", job.origin),
        "state": state,
        "attempt": meta.get("attempt"),
        "attempts_allowed": meta.get("attempts_allowed"),
        "progress": meta.get("progress"),
        "result": result,
        "error": error,
        "dead_reason": meta.get("dead") or None,
        "held_by": held_by,
        "enqueued_at": job.enqueued_at,
        "started_at": job.started_at,
        "ended_at": job.ended_at,
    }


def outbox_status(request, job_id):
    """The status of a job accepted but still in the outbox (state "outbox"), or None when it is
    not there or the caller may not know of it (queues/producer/outbox.py)."""
    from queues.producer import outbox

    entry = outbox.waiting(job_id)
    if entry is None:
        return None
    meta = outbox.stored_meta(entry)
    if not owners.can_read_job(request, meta):
        return None
    return _outbox_payload(entry, meta)


def _outbox_payload(entry, meta):
    return {"job_id": entry.job_id, "queue": meta.get("queue", entry.queue), "state": "outbox", "attempt": None,
            "attempts_allowed": meta.get("attempts_allowed"), "progress": None, "result": None, "error": None,
            "dead_reason": None, "held_by": None, "enqueued_at": None, "started_at": None, "ended_at": None}


class JobStatusView(FeatureView):
    @extend_schema(
        summary="A job's state, progress, and result or error",
        responses={
            200: JobStatusSerializer,
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            404: OpenApiResponse(DetailSerializer, description="No such job of yours (never existed, expired, or "
                                                                 "another's)."),
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable."),
        },
    )
    def get(self, request, job_id):
        if not JOB_ID_RE.fullmatch(job_id):
            return Response({"detail": f"No job {shown(job_id, 60)!r}: job ids are letters, digits, '-' and '_'."},
                            status=status.HTTP_404_NOT_FOUND)
        try:
            payload = self.status_of(request, job_id)
        except (redis.RedisError, queues.QueueUnavailable) as exc:
            logger.warning("job status unavailable: %s: %s", type(exc).__name__, exc)
            return Response({"detail": "The job queue is unavailable right now. Try again in a few seconds."},
                            status=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)})
        if payload is None:
            return Response({"detail": f"No job {job_id!r} (never enqueued, or expired)."},
                            status=status.HTTP_404_NOT_FOUND)
        return Response(JobStatusSerializer(payload).data)

    @extend_schema(
        summary="Cancel a job that has not started (queued, delayed, or waiting for a retry)",
        responses={
            200: OpenApiResponse(JobStatusSerializer, description="Canceled: the job will not run; its new state."),
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            404: OpenApiResponse(DetailSerializer, description="No such job of yours (as for GET)."),
            409: OpenApiResponse(JobConflictSerializer, description="Not canceled: the job is already running "
                                 "(stop it instead), has ended, or is due and being moved to its queue (try again)."),
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable; nothing was done."),
        },
    )
    def delete(self, request, job_id):
        """Cancel the caller's job (``queues.producer.cancel.cancel_job``), audited with its owner.
        Who may read a job but not cancel it (staff without the panel's act permission) gets 403."""
        from queues import audit
        from queues.jobs import read as jobread
        from queues.producer.cancel import cancel_job
        from queues.connection.clients import get_connection

        if not JOB_ID_RE.fullmatch(job_id):
            return self.get(request, job_id)
        owner = owners.owner_of(request)
        in_outbox = self.cancel_in_outbox(request, job_id, owner)
        if in_outbox is not None:
            return in_outbox
        try:
            job = jobread.fetch(job_id, get_connection(), check_origin=False)
            if job is None:
                return self.not_found(job_id)
            refusal, who = self.cancel_refusal(request, job_id, owner,
                                               {} if jobread.is_corrupt(job) else (job.meta or {}))
            if refusal is not None:
                return refusal
            canceled = cancel_job(job_id)
            if canceled.outcome == "gone":
                return self.not_found(job_id)
        except (redis.RedisError, queues.QueueUnavailable) as exc:
            logger.warning("job cancel unavailable: %s: %s", type(exc).__name__, exc)
            return Response({"detail": "The job queue is unavailable right now, so nothing was canceled. "
                                       "Try again in a few seconds."},
                            status=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)})
        audit.record(request, "cancel", getattr(job, "origin", "") or "", [job_id], "ok" if canceled.ok else "error",
                     f"DELETE /jobs/{job_id}/ by {who}: {canceled.detail}")
        if not canceled.ok:
            return Response({"detail": f"Not canceled: {canceled.detail}.", "state": canceled.state},
                            status=status.HTTP_409_CONFLICT)
        return self.get(request, job_id)

    def cancel_in_outbox(self, request, job_id, owner):
        """Cancel a job still in the outbox (accepted, not yet in Redis) by deleting its row; None
        when the job is not in the outbox (cancel it in Redis)."""
        from queues import audit
        from queues.producer import outbox

        entry = outbox.waiting(job_id)
        if entry is None:
            return None
        meta = outbox.stored_meta(entry)
        refusal, who = self.cancel_refusal(request, job_id, owner, meta)
        if refusal is not None:
            return refusal
        if not outbox.cancel(job_id):
            audit.record(request, "cancel", entry.queue, [job_id], "error",
                         f"DELETE /jobs/{job_id}/ by {who}: not canceled, it is being written to Redis right now")
            return Response({"detail": "Not canceled: the job is being written to the queue right now; try again in "
                                       "a few seconds.", "state": "outbox"}, status=status.HTTP_409_CONFLICT)
        audit.record(request, "cancel", entry.queue, [job_id], "ok",
                     f"DELETE /jobs/{job_id}/ by {who}: deleted from the outbox before it reached Redis")
        return Response(JobStatusSerializer(dict(_outbox_payload(entry, meta), state="canceled")).data)

    def cancel_refusal(self, request, job_id, owner, meta):
        """(refusal, who) for a job of ``meta``, in Redis or in the outbox: the 404 (another's job
        answers as one that never existed) or 403 when the caller may not cancel it, else None; and
        who cancels it, for the audit trail."""
        if not owners.can_read_job(request, meta):
            return self.not_found(job_id), None
        is_owner = owner is not None and meta.get(owners.OWNER_META_KEY) == owner.key
        if not (is_owner or _may_act_on_queues(request.user)):
            return Response({"detail": "Only the job's owner, or an operator who may act in the queue panel, "
                                       "can cancel it."}, status=status.HTTP_403_FORBIDDEN), None
        return None, f"its owner {owner.key}" if is_owner else "an operator"

    @staticmethod
    def not_found(job_id):
        return Response({"detail": f"No job {job_id!r} (never enqueued, or expired)."},
                        status=status.HTTP_404_NOT_FOUND)

    @staticmethod
    def status_of(request, job_id):
        """The job's status payload, or None when the caller may not know of it. A job Redis holds but
        that cannot be read (corrupt: planted, or written by something else) answers state "corrupt"
        to whoever may read any job (staff with the panel's view permission); its owner cannot be
        told apart from anyone else, so everyone else gets the 404 of a job that does not exist."""
        from queues.jobs import read as jobread
        from queues.connection.clients import get_connection

        try:
            job = jobread.fetch(job_id, get_connection(), check_origin=False)
        except (redis.RedisError, queues.QueueUnavailable):
            payload = outbox_status(request, job_id)  # accepted while Redis is down: still answerable
            if payload is None:
                raise
            return payload
        if job is None:
            payload = outbox_status(request, job_id)
            if payload is not None:
                return payload
            # Pushed between the two reads (its row deleted just now): Redis has it by now.
            job = jobread.fetch(job_id, get_connection(), check_origin=False)
            if job is None:
                return None
        if not jobread.is_corrupt(job):
            # Another owner's job answers exactly as one that never existed.
            if not owners.can_read_job(request, job.meta):
                return None
            try:
                return job_status(job)
            except (redis.ConnectionError, redis.TimeoutError):
                raise
            except Exception as exc:  # noqa: BLE001 — e.g. an unreadable results stream
                job = jobread.CorruptJob(job.id, f"{type(exc).__name__} while reading its status")
        logger.error("job status: job %s cannot be read: %s", job.id, job.why)
        if not owners.can_read_job(request, {}):
            return None
        return {"job_id": job.id, "queue": None, "state": "corrupt", "attempt": None, "attempts_allowed": None,
                "progress": None, "result": None, "error": f"The job cannot be read from Redis: {job.why}.",
                "dead_reason": None, "enqueued_at": None, "started_at": None, "ended_at": None}


def _may_act_on_queues(user):
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm("queues.act_on_queue_panel"))


@csrf_exempt
def unknown_endpoint(request, rest=""):
    """Any other path under ``features/`` or ``jobs/``: a JSON 404, not Django's HTML page.

    Also catches a POST missing its trailing slash, which Django would otherwise answer with a 500
    in DEBUG (APPEND_SLASH cannot redirect a POST) and a redirect that drops the body elsewhere.
    """
    path = request.path
    hint = f" Did you mean {path}/ ?" if not path.endswith("/") and _resolves(path + "/") else ""
    return JsonResponse({"detail": f"No endpoint {shown(path, 100)!r}.{hint}"}, status=status.HTTP_404_NOT_FOUND)


def _resolves(path):
    try:
        match = resolve(path)
    except Resolver404:
        return False
    return match.func is not unknown_endpoint


__all__ = ["EnqueueView", "FeatureView", "JobStatusView", "enqueue_schema", "MoneyField", "StrictCharField",
           "StrictIntegerField", "StrictRegexField"]
