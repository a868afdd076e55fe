"""The trace context a job carries: the hash field ``optima_trace``, outside what is signed.

The value is the W3C ``traceparent`` of the enqueue's ``send`` span, then, when the context has one,
a space and its ``tracestate``: ``00-<trace id>-<span id>-<flags>[ <tracestate>]``. A traceparent has
no space, so the first one splits the two. It is a field of its own (``OptimaJob.TRACE_FIELD``), not
in the job's ``meta`` (which the job's code may rewrite) nor in its ``data`` (what the signature
covers: queues/jobs/signing.py): a release that does not trace runs, retries and requeues the job
with the field kept (rq's ``Job.save`` writes the hash with HSET, fields it does not know included),
and one that traces reads it from a job the other release wrote.

The value comes from Redis: whoever can write there can write anything into it. ``extract`` hands it
to OpenTelemetry's W3C propagator, which ignores a malformed one (the attempt's span then has no link).
"""


def encode(span_context):
    """The field's value for ``span_context`` (an OpenTelemetry SpanContext)."""
    value = f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}"
    state = span_context.trace_state
    if state:
        value += " " + state.to_header()
    return value


def extract(value):
    """The OpenTelemetry Context of the field's ``value`` (str), or None when there is none."""
    if not value:
        return None
    # optional dependency: OpenTelemetry, only when tracing is on
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    traceparent, _, tracestate = value.partition(" ")
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    return TraceContextTextMapPropagator().extract(carrier)
