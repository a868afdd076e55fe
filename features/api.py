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

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
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


class BatchAcceptedSerializer(serializers.Serializer):
    batch_id = serializers.CharField()
    queue = serializers.CharField()
    status_url = serializers.CharField(help_text="GET it for the batch's state (queues.batch_state)")
    jobs = serializers.ListField(
        child=serializers.DictField(),
        help_text="one per member: {cabinet_id or product_id, job_id}",
    )


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
    concurrency = serializers.IntegerField(
        allow_null=True, help_text="jobs of the key that may be queued or running at once (null: a rate alone)"
    )
    in_use = serializers.IntegerField(
        allow_null=True, help_text="jobs of the key queued or running now (null: a rate alone)"
    )
    held = serializers.IntegerField(help_text="jobs of the key held now")
    ahead = serializers.IntegerField(allow_null=True, help_text="held jobs of the key before this one (null: not held)")
    rate = serializers.CharField(allow_null=True, help_text="the key's rate, e.g. 5/s (null: no rate)")
    next_release = serializers.FloatField(
        allow_null=True, help_text="seconds until the key's next held job is released (null: none waits, or paused)"
    )
    paused = serializers.BooleanField(help_text="an operator paused the key: its jobs wait held")


class JobStatusSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    queue = serializers.CharField(allow_null=True)
    state = serializers.CharField(
        help_text="outbox (accepted, not yet in Redis), queued, scheduled, held (waiting "
        "for a slot of its limit key), started, finished, failed, stopped, "
        "canceled"
    )
    attempt = serializers.IntegerField(allow_null=True)
    attempts_allowed = serializers.IntegerField(allow_null=True)
    progress = serializers.JSONField(allow_null=True)
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True, help_text="last line of the last failure")
    dead_reason = serializers.CharField(
        allow_null=True,
        help_text="why it is in the dead letter: exhausted, permanent, timeout, abandoned, stopped; "
        "refused without running: not_a_job, unsigned, corrupt",
    )
    held_by = HeldBySerializer(
        allow_null=True, help_text="the job's limit key while it is held, queued or running; null without one"
    )
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


def enqueue_schema(request_serializer, summary, more_responses=None):  # more: e.g. the repricer's 409
    return extend_schema(
        request=request_serializer,
        responses={
            202: OpenApiResponse(JobAcceptedSerializer, description="Enqueued."),
            **ERROR_RESPONSES,
            **(more_responses or {}),
        },
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


def database_unavailable(request, exc):
    """503 for a database that stays locked or unreachable past its timeout: the request's transaction
    rolled back, so nothing was enqueued and no row was written (the outbox row and the feature's row
    commit together or not at all)."""
    logger.warning(
        "%s %s: database unavailable (%s: %s): 503",
        request.method,
        request.path,
        type(exc).__name__,
        str(exc).splitlines()[0] if str(exc) else "",
    )
    return Response(
        {"detail": "The database is busy or unavailable right now, so nothing was done. Try again in a few seconds."},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
    )


def accepted(job, queue):
    url = reverse("features:job-status", args=[job.id])
    return Response(
        {"job_id": job.id, "queue": queue, "status_url": url},
        status=status.HTTP_202_ACCEPTED,
        headers={"Location": url},
    )


def batch_accepted(batch, queue, jobs):
    """202 ``{"batch_id", "queue", "status_url", "jobs"}`` and a ``Location`` header: a batch opened
    (``queues.batch``), its state at ``GET /batches/<id>/``; ``jobs`` lists what each member is for."""
    url = reverse("features:batch-status", args=[batch.id])
    return Response(
        {"batch_id": batch.id, "queue": queue, "status_url": url, "jobs": jobs},
        status=status.HTTP_202_ACCEPTED,
        headers={"Location": url},
    )


def body_error(detail):
    """400 in the validation shape, for a body that is not a JSON we can read at all."""
    return Response(
        {
            "detail": f"Invalid request body: {detail}",
            "errors": [{"field": "(body)", "value": None, "messages": [detail]}],
        },
        status=status.HTTP_400_BAD_REQUEST,
    )


class FeatureView(APIView):
    """What every feature endpoint shares: the safe JSON parser, and JSON answers to bad bodies."""

    parser_classes = [SafeJSONParser]

    def handle_exception(self, exc):
        if isinstance(exc, ParseError):  # not JSON at all: the same 400 shape as a bad field
            return body_error(str(exc.detail))
        if isinstance(exc, RequestDataTooBig):  # Django's would be an HTML 400
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return Response(
                {"detail": f"The request body is larger than the limit of {limit} bytes.", "limit_bytes": limit},
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            )
        if isinstance(exc, SuspiciousOperation):  # too many form fields or files, and the like
            return body_error(f"{type(exc).__name__}: the request is not acceptable.")
        if isinstance(exc, (OperationalError, InterfaceError)):
            return database_unavailable(self.request, exc)
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
        return queues.enqueue_call(
            queue,
            func,
            args,
            unique=owners.scoped(owner, unique) if unique else None,
            meta=owners.job_meta(owner),
            **options,
        )

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


def public_state(state):
    """The API's payload of a ``queues.JobState``: the error shown is its last line only (class and
    message, no internal URL or secret)."""
    payload = state.as_dict()
    if state.state != "corrupt":
        payload["error"] = public_error(state.error)
    return payload


class JobStatusView(FeatureView):
    @extend_schema(
        summary="A job's state, progress, and result or error",
        responses={
            200: JobStatusSerializer,
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            404: OpenApiResponse(
                DetailSerializer, description="No such job of yours (never existed, expired, or another's)."
            ),
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable."),
        },
    )
    def get(self, request, job_id):
        if not JOB_ID_RE.fullmatch(job_id):
            return Response(
                {"detail": f"No job {shown(job_id, 60)!r}: job ids are letters, digits, '-' and '_'."},
                status=status.HTTP_404_NOT_FOUND,
            )
        try:
            payload = self.status_of(request, job_id)
        except queues.QueueUnavailable as exc:
            logger.warning("job status unavailable: %s: %s", type(exc).__name__, exc)
            return Response(
                {"detail": "The job queue is unavailable right now. Try again in a few seconds."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
            )
        if payload is None:
            return Response(
                {"detail": f"No job {job_id!r} (never enqueued, or expired)."}, status=status.HTTP_404_NOT_FOUND
            )
        return Response(JobStatusSerializer(payload).data)

    @extend_schema(
        summary="Cancel a job that has not started (queued, delayed, or waiting for a retry)",
        responses={
            200: OpenApiResponse(JobStatusSerializer, description="Canceled: the job will not run; its new state."),
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            404: OpenApiResponse(DetailSerializer, description="No such job of yours (as for GET)."),
            409: OpenApiResponse(
                JobConflictSerializer,
                description="Not canceled: the job is already running "
                "(stop it instead), has ended, or is due and being moved to its queue (try again).",
            ),
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable; nothing was done."),
        },
    )
    def delete(self, request, job_id):
        """Cancel the caller's job (``queues.perform(request, "cancel", ...)``: the operator service every door
        uses), audited with its owner. Who may read a job but
        not cancel it (staff without the panel's act permission) gets 403."""
        if not JOB_ID_RE.fullmatch(job_id):
            return self.get(request, job_id)
        owner = owners.owner_of(request)
        try:
            state = queues.job_state(job_id)
            if state is None:
                return self.not_found(job_id)
            refusal, who = self.cancel_refusal(request, job_id, owner, state.meta)
            if refusal is not None:
                return refusal
            # The operator service: the same permission rule, audit row and answers as the panel's and the
            # admin's cancel. A DELETE says what it does: it is its own confirmation.
            canceled = queues.perform(
                request,
                "cancel",
                [job_id],
                confirmed=True,
                owner=who.startswith("its owner"),
                reason=f"DELETE /jobs/{job_id}/ by {who}",
            ).first()
        except queues.QueueUnavailable as exc:
            return self.cancel_unavailable(exc)
        if canceled.data.get("unavailable"):
            return self.cancel_unavailable(canceled.detail)
        if canceled.kind == "refused":
            return Response({"detail": f"Not canceled: {canceled.detail}."}, status=status.HTTP_403_FORBIDDEN)
        if canceled.state == "gone":
            return self.not_found(job_id)
        if canceled.state == "outbox":  # in the outbox, being written to Redis right now
            return Response(
                {
                    "detail": "Not canceled: the job is being written to the queue right now; try again in "
                    "a few seconds.",
                    "state": "outbox",
                },
                status=status.HTTP_409_CONFLICT,
            )
        if not canceled.ok:
            return Response(
                {"detail": f"Not canceled: {canceled.detail}.", "state": canceled.state},
                status=status.HTTP_409_CONFLICT,
            )
        if state.state == "outbox":  # its row is gone: it never reached Redis
            return Response(JobStatusSerializer(public_state(state.but(state="canceled"))).data)
        return self.get(request, job_id)

    @staticmethod
    def cancel_unavailable(exc):
        logger.warning("job cancel unavailable: %s", exc)
        return Response(
            {"detail": "The job queue is unavailable right now, so nothing was canceled. Try again in a few seconds."},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
        )

    def cancel_refusal(self, request, job_id, owner, meta):
        """(refusal, who) for a job of ``meta``, in Redis or in the outbox: the 404 (another's job
        answers as one that never existed) or 403 when the caller may not cancel it, else None; and
        who cancels it, for the audit trail."""
        if not owners.can_read_job(request, meta):
            return self.not_found(job_id), None
        is_owner = owners.owns_job(owner, meta)
        if not (is_owner or _may_act_on_queues(request.user)):
            return Response(
                {"detail": "Only the job's owner, or an operator who may act in the queue panel, can cancel it."},
                status=status.HTTP_403_FORBIDDEN,
            ), None
        return None, f"its owner {owner.key}" if is_owner else "an operator"

    @staticmethod
    def not_found(job_id):
        return Response(
            {"detail": f"No job {job_id!r} (never enqueued, or expired)."}, status=status.HTTP_404_NOT_FOUND
        )

    @staticmethod
    def status_of(request, job_id):
        """The job's status payload, or None when the caller may not know of it. A job Redis holds but
        that cannot be read (corrupt: planted, or written by something else) answers state "corrupt"
        to whoever may read any job (staff with the panel's view permission); its owner cannot be
        told apart from anyone else, so everyone else gets the 404 of a job that does not exist."""
        state = queues.job_state(job_id)
        if state is None:
            return None
        # Another owner's job answers exactly as one that never existed (a corrupt one has no owner).
        if not owners.can_read_job(request, state.meta):
            return None
        return public_state(state)


class JobSearchResultSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    queue = serializers.CharField()
    state = serializers.CharField(
        help_text="rq's status: queued, scheduled, started, finished, failed, stopped, "
        "canceled, deferred (corrupt: a job Redis holds but cannot be read)"
    )
    function = serializers.CharField(allow_null=True, help_text="the job's dotted function path")
    enqueued_at = serializers.CharField(allow_null=True, help_text="ISO 8601, UTC")
    status_url = serializers.CharField(help_text="GET it for the job's state, progress and result")


class JobSearchPageSerializer(serializers.Serializer):
    results = JobSearchResultSerializer(many=True)
    total = serializers.IntegerField(
        help_text="jobs in the list the search read (your jobs, a function's, a "
        "queue's, or a queue's jobs in one state), before the other criteria"
    )
    scanned = serializers.IntegerField(help_text="jobs of that list this page read")
    exact = serializers.BooleanField(
        help_text="true: every criterion was answered by the list itself, pages are "
        "complete; false: the others were checked on at most 5,000 jobs per "
        "page, and a page may hold fewer results than page_size"
    )
    next = serializers.CharField(
        allow_null=True, help_text="the next page's URL (continues the scan); null: nothing more"
    )


class _DeclaredQueues:
    """The declared queue names, read when the schema is generated, not when this module is imported:
    URL loading imports it during ``manage.py check``, and a configuration the checks must report (E006,
    E009...) would otherwise stop the import before the checks could run."""

    def __iter__(self):
        return iter(queues.queue_names())

    def __len__(self):
        return len(queues.queue_names())


def search_parameters():
    """``GET /jobs/``'s query parameters, their limits in the schema (a request within them is answered 200)."""
    return [
        OpenApiParameter("function", str, description="the job's dotted function path, exactly"),
        OpenApiParameter("queue", str, enum=_DeclaredQueues(), description="a declared queue"),
        OpenApiParameter("state", str, enum=list(queues.SEARCH_STATES)),
        OpenApiParameter(
            "q",
            {"type": "string", "maxLength": queues.SEARCH_TEXT_CHARS},
            description="text in the job id or its arguments (case-insensitive)",
        ),
        OpenApiParameter(
            "page",
            {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
            description="1-based page (with page_size); the `next` URL continues a scan",
        ),
        OpenApiParameter(
            "page_size",
            {"type": "integer", "minimum": 1, "maximum": queues.SEARCH_MAX_PAGE_SIZE},
            description="results per page (25)",
        ),
        OpenApiParameter(
            "start",
            {"type": "integer", "minimum": 0, "maximum": queues.SEARCH_MAX_START},
            description="where the scan starts in the list (from `next`)",
        ),
    ]


MAX_PAGE = queues.SEARCH_MAX_START // queues.SEARCH_MAX_PAGE_SIZE  # (page - 1) * page_size stays within start's
# (name, default, lowest, highest) of GET /jobs/'s numbers; page_size's highest is search_jobs' own check
SEARCH_NUMBERS = (("page", 1, 1, MAX_PAGE), ("page_size", 25, 1, None), ("start", None, 0, queues.SEARCH_MAX_START))
_DIGITS = re.compile(r"\s*[+-]?[0-9]+\s*")


def search_number(raw, low, high):
    """(the integer of ``raw``, None) or (None, why it is refused): below ``low``, above ``high``, or no
    integer. A number too long for ``int`` (over 4,300 digits) is out of range, not "no integer"."""
    try:
        value = int(raw)
    except ValueError:
        if _DIGITS.fullmatch(raw) and high is not None:
            return None, f"must be at most {high:,}"
        return None, f"must be an integer >= {low}"
    if value < low:
        return None, f"must be an integer >= {low}"
    if high is not None and value > high:
        return None, f"must be at most {high:,}"
    return value, None


class JobListView(FeatureView):
    """``GET /jobs/?function=&queue=&state=&q=&page=``: the caller's live jobs, newest first
    (``queues.search_jobs`` over the owner index); staff holding the queue panel's view permission see
    every job, as ``GET /jobs/<id>/`` answers them any job."""

    @extend_schema(
        operation_id="jobs_list",  # not drf-spectacular's "jobs_retrieve", GET /jobs/<id>/'s (its W001)
        summary="Your live jobs, newest first: by function, queue, state, or a text in their id or arguments",
        parameters=search_parameters(),
        responses={
            200: JobSearchPageSerializer,
            400: ERROR_RESPONSES[400],
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable."),
        },
    )
    def get(self, request):
        params = request.query_params
        criteria = {
            "function": params.get("function") or None,
            "queue": params.get("queue") or None,
            "state": params.get("state") or None,
            "text": params.get("q") or None,
        }
        numbers, errors = {}, []
        for name in ("queue", "state"):  # given empty: a client's bug (leave it out for any)
            if params.get(name) == "":
                errors.append({"field": name, "value": "", "messages": ["must not be empty: leave it out for any"]})
        for name, default, low, high in SEARCH_NUMBERS:
            raw = params.get(name)
            if raw is None:
                numbers[name] = default
                continue
            numbers[name], message = search_number(raw, low, high)
            if message:
                errors.append({"field": name, "value": shown(raw, 60), "messages": [message]})
        if errors:
            return self.bad_search(errors)
        size = numbers["page_size"]
        start = numbers["start"] if numbers["start"] is not None else (numbers["page"] - 1) * size
        owner = None
        if not owners.can_read_all_jobs(request):
            caller = owners.owner_of(request)
            if caller is None:  # the permission refuses such a caller first; never list every job
                return Response(
                    {"detail": "Authentication credentials were not provided."}, status=status.HTTP_401_UNAUTHORIZED
                )
            owner = caller.key
        try:
            found = queues.search_jobs(**criteria, owner=owner, start=start, page_size=size)
        except (queues.InvalidSearch, queues.UnknownQueue) as exc:
            field = next((n for n in ("state", "page_size", "start", "queue") if str(exc).startswith(n)), "q")
            if isinstance(exc, queues.UnknownQueue):
                field = "queue"
            value = {
                "q": criteria["text"],
                "queue": criteria["queue"],
                "state": criteria["state"],
                "page_size": size,
                "start": start,
            }.get(field)
            return self.bad_search([{"field": field, "value": shown(value), "messages": [str(exc).strip('"')]}])
        except queues.QueueUnavailable as exc:
            logger.warning("job search unavailable: %s: %s", type(exc).__name__, exc)
            return Response(
                {"detail": "The job queue is unavailable right now. Try again in a few seconds."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
            )
        next_url = None
        if found.next_start is not None:
            query = request.query_params.copy()
            query.pop("page", None)
            query["start"] = str(found.next_start)
            query["page_size"] = str(size)
            next_url = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
        results = [
            {
                "job_id": hit.job_id,
                "queue": hit.queue,
                "state": hit.state,
                "function": hit.function,
                "enqueued_at": hit.enqueued_at,
                "status_url": reverse("features:job-status", args=[hit.job_id]),
            }
            for hit in found.hits
            if JOB_ID_RE.fullmatch(hit.job_id)
        ]
        return Response(
            JobSearchPageSerializer(
                {
                    "results": results,
                    "total": found.total,
                    "scanned": found.scanned,
                    "exact": found.exact,
                    "next": next_url,
                }
            ).data
        )

    @staticmethod
    def bad_search(errors):
        detail = "Invalid search: " + "; ".join(
            f"{e['field']}={e['value']!r}: {' '.join(e['messages'])}" for e in errors
        )
        return Response({"detail": detail, "errors": errors}, status=status.HTTP_400_BAD_REQUEST)


def _may_act_on_queues(user):
    return bool(user is not None and user.is_active and user.is_staff and user.has_perm(queues.ACT_ON_QUEUE_PANEL))


class BatchStatusSerializer(serializers.Serializer):
    id = serializers.CharField()
    state = serializers.CharField(help_text="open, running, succeeded, completed_with_dead, canceled")
    total = serializers.IntegerField(help_text="members")
    pending = serializers.IntegerField(help_text="members neither finished, dead nor canceled")
    finished = serializers.IntegerField()
    dead = serializers.IntegerField()
    canceled = serializers.IntegerField()
    created_at = serializers.CharField(allow_null=True, help_text="ISO 8601, UTC")
    finished_at = serializers.CharField(allow_null=True, help_text="ISO 8601, UTC; null until it ends")
    description = serializers.CharField()
    callbacks = serializers.DictField(
        child=serializers.CharField(), help_text="on_success / on_complete / on_death -> the callback's job id"
    )
    fired = serializers.DictField(
        child=serializers.CharField(),
        help_text="on_success / on_complete / on_death -> when it was pushed (ISO 8601), or never / canceled",
    )


class BatchStatusView(FeatureView):
    """``GET /batches/<id>/``: ``queues.batch_state`` to the batch's owner (``queues.batch(meta=
    queues.owner_meta(...))``) and staff who may read every job; anyone else gets the 404 of no batch."""

    @extend_schema(
        summary="A batch's state and counts (queues.batch_state)",
        responses={
            200: BatchStatusSerializer,
            401: ERROR_RESPONSES[401],
            403: ERROR_RESPONSES[403],
            404: OpenApiResponse(
                DetailSerializer, description="No such batch of yours (never opened, expired, or another's)."
            ),
            503: OpenApiResponse(DetailSerializer, description="The queues are unavailable."),
        },
    )
    def get(self, request, batch_id):
        missing = Response(
            {"detail": f"No batch {shown(batch_id, 60)!r} (never opened, or expired)."},
            status=status.HTTP_404_NOT_FOUND,
        )
        if not JOB_ID_RE.fullmatch(batch_id):
            return missing
        try:
            state = queues.batch_state(batch_id)
        except queues.QueueUnavailable as exc:
            logger.warning("batch status unavailable: %s: %s", type(exc).__name__, exc)
            return Response(
                {"detail": "The job queue is unavailable right now. Try again in a few seconds."},
                status=status.HTTP_503_SERVICE_UNAVAILABLE,
                headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
            )
        # The jobs' owner rule: another owner's batch answers exactly as one that never existed.
        if state is None or not owners.can_read_job(request, queues.owner_meta(state.owner)):
            return missing
        return Response(BatchStatusSerializer(state.as_dict()).data)


@csrf_exempt
def unknown_endpoint(request, rest=""):
    """Any other path under ``features/``, ``jobs/`` or ``batches/``: a JSON 404, not Django's HTML page.

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


__all__ = [
    "BatchStatusView",
    "batch_accepted",
    "EnqueueView",
    "FeatureView",
    "JobListView",
    "JobStatusView",
    "enqueue_schema",
    "MoneyField",
    "StrictCharField",
    "StrictIntegerField",
    "StrictRegexField",
]
