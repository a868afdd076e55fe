"""The spans: ``send <queue>`` around an enqueue, ``process <queue>`` around each attempt.

Attributes follow OpenTelemetry's messaging semantic conventions:

==============================  ===============================================================
``messaging.system``            ``rq``: the jobs are rq jobs in Redis (any rq reader sees them);
                                a tracing backend groups them with other rq instrumentation
``messaging.operation.name``    ``send`` / ``process``
``messaging.operation.type``    ``send`` / ``process``
``messaging.destination.name``  the declared queue
``messaging.message.id``        the job id (``send``: for one job; a batch has
                                ``messaging.batch.message_count`` instead)
``messaging.optima.attempt``    ``process``: the 1-based attempt (``job.meta["attempt"]``)
``error.type``                  the exception's qualified class name (``builtins.RuntimeError``);
                                the span's status is then ERROR, its description the class name
                                (never the message: it may carry the job's arguments)
==============================  ===============================================================

Each attempt's span is linked to the enqueue's ``send`` span (``QUEUE_TRACE_PARENT = "link"``, the
default: a job retried for an hour, or one per request of a batch, does not stretch the request's
trace), or is its child (``"child"``). Retries, requeues from the dead letters and the outbox's relay
keep the job hash, so every attempt points at the same ``send`` span.

Imported only when ``queues.tracing.on``: it imports OpenTelemetry.
"""

from contextlib import contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from queues.jobs import meta as jobmeta
from queues.tracing import carrier, setup

SYSTEM = "rq"
ATTEMPT = "messaging.optima.attempt"


def error_type(exc_type):
    """``error.type`` of an exception class: its qualified name."""
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


def mark_failed(span, exc_type):
    span.set_attribute("error.type", error_type(exc_type))
    span.set_status(Status(StatusCode.ERROR, exc_type.__name__))


@contextmanager
def sending(queue_name, jobs):
    """The PRODUCER span of an enqueue of ``jobs`` on ``queue_name``; each job gets its context
    (``job.trace``) before it is written."""
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": queue_name,
    }
    if len(jobs) == 1:
        attributes["messaging.message.id"] = jobs[0].id
    else:
        attributes["messaging.batch.message_count"] = len(jobs)
    with setup.tracer().start_as_current_span(
        f"send {queue_name}",
        kind=SpanKind.PRODUCER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        value = carrier.encode(span.get_span_context())
        for job in jobs:
            job.trace = value
        try:
            yield span
        except BaseException as exc:
            mark_failed(span, type(exc))
            raise


@contextmanager
def processing(job):
    """The CONSUMER span of one attempt of ``job``, current while it runs (``failed`` finds it)."""
    queue_name = jobmeta.queue_name(job)
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": queue_name,
        "messaging.message.id": job.id,
        ATTEMPT: _attempt(job),
    }
    sent = carrier.extract(getattr(job, "trace", ""))
    sent_span = trace.get_current_span(sent).get_span_context() if sent is not None else None
    links = None
    parent = otel_context.Context()  # a root: nothing of the worker's own context leaks in
    if sent_span is not None and sent_span.is_valid:
        if setup.parent_mode() == "child":
            parent = sent
        else:
            links = [Link(sent_span)]
    with setup.tracer().start_as_current_span(
        f"process {queue_name}",
        context=parent,
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def _attempt(job):
    """The attempt about to run: a dead job an operator requeued starts at 1 (``jobmeta.new_life``)."""
    if (job.meta or {}).get(jobmeta.DEAD):
        return 1
    return jobmeta.current_attempt(job)


def failed(exc_type):
    """The running attempt raised ``exc_type``: its span gets ``error.type`` and status ERROR."""
    span = trace.get_current_span()
    if span.is_recording():
        mark_failed(span, exc_type)
