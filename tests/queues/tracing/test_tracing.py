"""OpenTelemetry (issue 22, point 1): a request's enqueue and the job's attempts in one picture.

The test process traces with an SDK provider of its own (``setup.activate``: its spans stay in
memory); the workers are real ``manage.py rqworker`` processes configured by ``OTEL_*`` only, which
export over OTLP/HTTP to a receiver in this test (``Receiver``: the protobuf requests decoded with
opentelemetry-proto).
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.db import transaction
from django.test import override_settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import queues
from queues import tracing
from queues.catalog.lookup import OptimaJob, get_queue
from queues.failures.operations import retry_dead_letter
from queues.jobs import signing
from queues.keyspace import keys
from queues.models import DeadLetter
from queues.producer import outbox
from queues.tracing import carrier, setup
from queues.worker.adapter import OptimaSimpleWorker
from tests.jobs import sample
from tests.support import ROOT
from tests.support.lifecycle import release_now, wait_dead, wait_scheduled_for_attempt


@pytest.fixture
def traced():
    """This process traces into memory; back to the environment's choice (off in tests) afterwards."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    setup.activate(provider)
    exporter.tracer = provider.get_tracer("tests")
    yield exporter
    setup.from_env()
    assert tracing.on is False


def trace_field(connection, job_id):
    value = connection.hget(keys.job_key(job_id), OptimaJob.TRACE_FIELD)
    return value.decode() if value is not None else None


# -- off -----------------------------------------------------------------------------------------


def test_unconfigured_tracing_is_off_and_writes_no_trace_field(queue_redis):
    assert tracing.on is False and setup.wanted_exporters() == []
    job = queues.enqueue("default", sample.add, 2, 3)
    assert trace_field(queue_redis, job.id) is None


def test_an_exporter_or_endpoint_in_the_environment_turns_tracing_on_and_sdk_disabled_wins(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    assert setup.wanted_exporters() == ["otlp"]
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert setup.wanted_exporters() == []
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert setup.from_env() is False and tracing.on is False


# -- the producer side ---------------------------------------------------------------------------


def test_the_signed_message_is_byte_identical_with_tracing_on(traced, queue_redis):
    """A rolling deploy: a release that does not trace verifies the jobs of one that does, and back."""
    job = queues.enqueue("default", sample.add, 2, 3, job_id="traced-sig")
    assert job.trace  # the field is there...
    stored = OptimaJob.fetch(job.id, connection=queue_redis)
    untraced = OptimaJob.create(
        "tests.jobs.sample.add", args=[2, 3], id="traced-sig", connection=queue_redis, meta=stored.meta
    )
    assert untraced.trace == ""
    assert signing._message(stored.id, stored.data, signing.callbacks_of(stored)) == signing._message(
        untraced.id, untraced.data, signing.callbacks_of(untraced)
    )  # ...and outside what is signed
    assert signing.sign(untraced) == stored.signature and signing.verify(stored)


def test_enqueue_makes_a_send_span_and_the_job_carries_its_context_written_with_the_job(traced, queue_redis):
    with traced.tracer.start_as_current_span("GET /orders", kind=SpanKind.SERVER) as request:
        job = queues.enqueue("default", sample.add, 2, 3)
    send = [s for s in traced.get_finished_spans() if s.name == "send default"]
    assert len(send) == 1
    span = send[0]
    assert span.kind == SpanKind.PRODUCER and span.parent.span_id == request.get_span_context().span_id
    assert dict(span.attributes) == {
        "messaging.system": "rq",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "default",
        "messaging.message.id": job.id,
    }
    sc = span.get_span_context()
    assert trace_field(queue_redis, job.id) == f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"


def test_enqueue_many_makes_one_send_span_for_the_batch(traced, queue_redis):
    jobs = queues.enqueue_many("default", sample.add, [(1, 2), (3, 4)])
    [span] = [s for s in traced.get_finished_spans() if s.name == "send default"]
    assert span.attributes["messaging.batch.message_count"] == 2
    assert {trace_field(queue_redis, job.id) for job in jobs} == {carrier.encode(span.get_span_context())}


def test_a_refused_enqueue_ends_its_send_span_with_error_type(traced):
    with pytest.raises(queues.InvalidJob):
        queues.enqueue("default", sample.add, 2, 3, job_id="taken-id")
        queues.enqueue("default", sample.add, 2, 3, job_id="taken-id")
    span = traced.get_finished_spans()[-1]
    assert span.attributes["error.type"] == "queues.exceptions.InvalidJob"
    assert span.status.status_code.name == "ERROR"


def test_a_task_of_the_tasks_api_is_sent_with_a_send_span_too(traced, queue_redis):
    from tests.jobs import tasks

    result = tasks.add.enqueue(2, 3)
    [span] = [s for s in traced.get_finished_spans() if s.name == f"send {tasks.add.queue_name}"]
    assert span.attributes["messaging.message.id"] == result.id
    assert trace_field(queue_redis, result.id) == carrier.encode(span.get_span_context())


@pytest.mark.django_db
def test_the_outbox_row_and_its_relay_keep_the_trace_context(traced, queue_redis):
    with transaction.atomic():  # a TestCase transaction never commits: the row waits for the relay
        job = queues.enqueue("default", sample.add, 2, 3)
    assert job.trace
    from queues.models import OutboxEntry

    entry = OutboxEntry.objects.get(job_id=job.id)
    assert entry.job[OptimaJob.TRACE_FIELD] == job.trace
    OutboxEntry.objects.filter(pk=entry.pk).update(claimed_until=entry.created_at)  # the pusher "died"
    outbox.relay()
    assert trace_field(queue_redis, job.id) == job.trace


def test_the_carrier_keeps_tracestate_and_ignores_a_malformed_value():
    from opentelemetry.trace import SpanContext, TraceState, get_current_span

    sc = SpanContext(
        trace_id=0xABC, span_id=0xDEF, is_remote=True, trace_flags=1, trace_state=TraceState([("vendor", "x y")])
    )
    value = carrier.encode(sc)
    back = get_current_span(carrier.extract(value)).get_span_context()
    assert (back.trace_id, back.span_id, back.trace_state.get("vendor")) == (0xABC, 0xDEF, "x y")
    assert not get_current_span(carrier.extract("\n00-zz planted")).get_span_context().is_valid


# -- the worker side, in this process (the QUEUE_TRACE_PARENT setting) ----------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", ["link", "child"])
def test_an_attempt_is_linked_to_the_send_span_or_its_child_as_the_setting_says(traced, queue_redis, mode):
    with override_settings(QUEUE_TRACE_PARENT=mode):
        job = queues.enqueue("default", sample.add, 2, 3)
        OptimaSimpleWorker([get_queue("default", connection=queue_redis)], connection=queue_redis).work(
            burst=True, with_scheduler=False
        )
    spans = traced.get_finished_spans()
    [send] = [s for s in spans if s.name == "send default"]
    [process] = [s for s in spans if s.name == "process default"]
    assert process.kind == SpanKind.CONSUMER and process.attributes["messaging.message.id"] == job.id
    sent = send.get_span_context()
    if mode == "link":
        assert process.parent is None and process.context.trace_id != sent.trace_id
        assert [(link.context.trace_id, link.context.span_id) for link in process.links] == [
            (sent.trace_id, sent.span_id)
        ]
    else:
        assert (process.parent.span_id, process.context.trace_id) == (sent.span_id, sent.trace_id)
        assert list(process.links) == []


def test_a_bad_trace_parent_setting_is_check_queues_e090():
    from django.core.checks import Error

    from queues.tracing.checks import check_trace_parent

    with override_settings(QUEUE_TRACE_PARENT="parent"):
        assert check_trace_parent() == [
            Error(
                "QUEUE_TRACE_PARENT must be 'link' or 'child', got 'parent'.",
                hint="'link' (the default): each attempt's span starts a trace of its own, linked to the enqueue's; "
                "'child': it joins the enqueue's trace. docs/tracing.md",
                id="queues.E090",
            )
        ]
    with override_settings(QUEUE_TRACE_PARENT="child"):
        assert check_trace_parent() == []


# -- real worker processes exporting over OTLP/HTTP ------------------------------------------------


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: every span of every request, as (service name, protobuf Span)."""

    def __init__(self):
        self.spans = []
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def by_name(self, name):
        return [span for _service, span in self.spans if span.name == name]


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
        for resource_spans in request.resource_spans:
            service = next(
                (a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), ""
            )
            for scope_spans in resource_spans.scope_spans:
                self.server.spans.extend((service, span) for span in scope_spans.spans)
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def attributes(span):
    out = {}
    for kv in span.attributes:
        value = kv.value
        out[kv.key] = getattr(value, value.WhichOneof("value"))
    return out


def burst(start_worker, receiver, *args):
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SERVICE_NAME": "optima-worker-test",
    }
    process = start_worker("default", "--burst", *args, env=env)
    assert process.wait(60) == 0, process.output()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_real_workers_export_one_span_per_attempt_linked_to_the_request(traced, receiver, start_worker, queue_redis):
    with traced.tracer.start_as_current_span("GET /orders", kind=SpanKind.SERVER) as request:
        ok = queues.enqueue("default", sample.add, 2, 3)
        failing = queues.enqueue("default", sample.fail, "nope", attempts=2)
    request_trace = request.get_span_context().trace_id
    sends = {
        s.attributes["messaging.message.id"]: s.get_span_context()
        for s in traced.get_finished_spans()
        if s.name == "send default"
    }

    burst(start_worker, receiver)  # forking: ok runs, failing's attempt 1 fails (a horse per job)
    wait_scheduled_for_attempt(queue_redis, "default", failing.id, 2)
    release_now(queue_redis, "default", failing.id)
    burst(start_worker, receiver, "--no-fork")  # fork-free: attempt 2 fails, the job is dead
    wait_dead(queue_redis, "default", failing.id)
    row = DeadLetter.objects.get(job_id=failing.id)
    outcome = retry_dead_letter(row.pk)  # the admin's retry: the same job, requeued
    assert (outcome.outcome, outcome.job_id) == ("ok", failing.id), outcome
    burst(start_worker, receiver, "--concurrency", "2")  # a thread of the concurrent worker: fails again

    processed = receiver.by_name("process default")
    assert {service for service, _span in receiver.spans} == {"optima-worker-test"}
    by_job = {}
    for span in processed:
        by_job.setdefault(attributes(span)["messaging.message.id"], []).append(span)
    assert sorted(len(spans) for spans in by_job.values()) == [1, 3], json.dumps(
        [attributes(s) for s in processed], default=str
    )
    for job_id, spans in by_job.items():
        sent = sends[job_id]
        for span in spans:
            assert span.kind == span.SPAN_KIND_CONSUMER
            [link] = span.links
            assert (int.from_bytes(link.trace_id, "big"), int.from_bytes(link.span_id, "big")) == (
                request_trace,
                sent.span_id,
            )  # the request's trace, through every retry and the requeue
    [done] = by_job[ok.id]
    assert attributes(done) == {
        "messaging.system": "rq",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "default",
        "messaging.message.id": ok.id,
        "messaging.optima.attempt": 1,
    }
    assert done.status.code != done.status.STATUS_CODE_ERROR
    failed = sorted(by_job[failing.id], key=lambda s: s.start_time_unix_nano)
    assert [attributes(s)["messaging.optima.attempt"] for s in failed] == [1, 2, 1]  # the requeue: a new life
    for span in failed:
        assert attributes(span)["error.type"] == "builtins.RuntimeError"
        assert (span.status.code, span.status.message) == (span.status.STATUS_CODE_ERROR, "RuntimeError")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_request_in_a_web_process_and_its_job_in_a_worker_share_the_trace(
    receiver, start_worker, subprocess_env, queue_redis
):
    """The web process is set up by OTEL_* alone: the app installs the SDK and, with
    opentelemetry-instrumentation-django installed, the request's SERVER span is the send span's parent."""
    import subprocess
    import sys

    env = dict(subprocess_env, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_SERVICE_NAME="optima-web-test")
    web = subprocess.run(
        [sys.executable, "tests/support/tracing_web.py"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert web.returncode == 0, web.stderr
    job_id = web.stdout.strip().splitlines()[-1]
    burst(start_worker, receiver, "--no-fork")

    spans = {service: [] for service, _span in receiver.spans}
    for service, span in receiver.spans:
        spans[service].append(span)
    [request] = [s for s in spans["optima-web-test"] if s.kind == s.SPAN_KIND_SERVER]
    [send] = [s for s in spans["optima-web-test"] if s.name == "send default"]
    [process] = [s for s in spans["optima-worker-test"] if s.name == "process default"]
    assert (send.trace_id, send.parent_span_id) == (request.trace_id, request.span_id)
    assert attributes(process)["messaging.message.id"] == job_id
    assert [(link.trace_id, link.span_id) for link in process.links] == [(request.trace_id, send.span_id)]
