"""Whether this process traces, and its OpenTelemetry SDK when the environment asks for one.

Called from the app's ``ready()`` (web, worker, every ``manage.py`` command) and from ``refresh()``.

Tracing is on when ``OTEL_SDK_DISABLED`` is not ``true`` and either

- the process set a tracer provider of its own before Django started (``opentelemetry-instrument``,
  or ``trace.set_tracer_provider`` in ``wsgi.py``/``manage.py``): it is used as it is; or
- the environment names an exporter: ``OTEL_TRACES_EXPORTER`` (other than ``none``), or
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``. Then this module installs
  the SDK's ``TracerProvider`` (its resource from ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``,
  ``service.name`` ``optima-queues`` when neither names one; its sampler from ``OTEL_TRACES_SAMPLER``)
  with a ``BatchSpanProcessor`` (``OTEL_BSP_*``) and the exporter: ``otlp`` (the default: OTLP over
  HTTP/protobuf, ``OTEL_EXPORTER_OTLP_*``), ``console``, or both (comma-separated).

Otherwise ``queues.tracing.on`` stays False and nothing of OpenTelemetry is imported.
``opentelemetry-instrumentation-django``, when installed, adds the request spans (docs/tracing.md).
"""

import logging
import os
import sys
import threading

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

import queues.tracing as switch
from queues.conf import Problem

logger = logging.getLogger("queues.tracing")

HORSE_FLUSH_SECONDS = 2.0  # longest wait of a work horse for its spans' export before it exits
PARENT_SETTING = "QUEUE_TRACE_PARENT"
PARENT_MODES = ("link", "child")

_tracer = None
_provider = None  # the provider spans come from (the global one, or the one ``activate`` was given)
_installed = None  # the provider this module built from the environment (flushed by horses)
_parent = None  # cached QUEUE_TRACE_PARENT


def _env(name):
    return (os.environ.get(name) or "").strip()


def wanted_exporters():
    """The exporters the environment names (lower case), [] when it names none."""
    names = [n.strip().lower() for n in _env("OTEL_TRACES_EXPORTER").split(",") if n.strip()]
    if names:
        return [n for n in names if n != "none"]
    if _env("OTEL_EXPORTER_OTLP_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return ["otlp"]
    return []


def _own_provider():
    """The process's own tracer provider, or None (nothing imported OpenTelemetry, or no provider set)."""
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace  # optional dependency: OpenTelemetry, only when tracing is on

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider


def from_env():
    """Decide ``queues.tracing.on`` and, when the environment asks for it, install the SDK."""
    global _installed
    if _env("OTEL_SDK_DISABLED").lower() == "true":
        return _use(None)
    provider = _own_provider()
    if provider is None:
        exporters = wanted_exporters()
        if not exporters:
            return _use(None)
        try:
            from opentelemetry import trace  # optional dependency: OpenTelemetry, only when tracing is on
        except ImportError:
            logger.warning(
                "OTEL_* asks for tracing (%s) but OpenTelemetry is not installed: nothing is traced. "
                "pip install 'optima-queues[tracing]' (docs/tracing.md).",
                ", ".join(exporters),
            )
            return _use(None)
        provider = _installed = _build(exporters)

        trace.set_tracer_provider(provider)
        _instrument_django()
    return _use(provider)


def activate(provider):
    """Trace with ``provider`` (a TracerProvider) without making it the process's global one: for
    tests and embedding. ``from_env()`` (or ``queues.tracing.refresh()``) goes back to the environment's."""
    return _use(provider)


def _use(provider):
    global _tracer, _provider
    _provider = provider
    if provider is None:
        _tracer = None
        switch.on = False
        return False
    _tracer = provider.get_tracer("queues", schema_url="https://opentelemetry.io/schemas/1.28.0")
    switch.on = True
    return True


def tracer():
    return _tracer


def _build(exporters):
    from opentelemetry.sdk.resources import Resource  # optional dependency: OpenTelemetry, only when tracing is on
    from opentelemetry.sdk.trace import TracerProvider  # optional dependency: OpenTelemetry, only when tracing is on

    # optional dependency: OpenTelemetry, only when tracing is on
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    attributes = {}
    if not _env("OTEL_SERVICE_NAME") and "service.name=" not in _env("OTEL_RESOURCE_ATTRIBUTES"):
        attributes["service.name"] = "optima-queues"
    provider = TracerProvider(resource=Resource.create(attributes))
    for name in exporters:
        exporter = _exporter(name)
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _exporter(name):
    if name == "otlp":
        protocol = _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or _env("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
        if protocol != "http/protobuf":
            logger.warning(
                "OTEL_EXPORTER_OTLP_PROTOCOL=%r: only 'http/protobuf' is installed "
                "(opentelemetry-exporter-otlp-proto-http); spans are sent with it. Point the "
                "endpoint at the collector's HTTP port (4318), or set a provider of your own.",
                protocol,
            )
        # optional dependency: OpenTelemetry, only when tracing is on
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if name == "console":
        # optional dependency: OpenTelemetry, only when tracing is on
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    logger.warning(
        "OTEL_TRACES_EXPORTER names %r, which is not installed: 'otlp' and 'console' are. Its spans are dropped.", name
    )
    return None


def _instrument_django():
    """Request spans, when opentelemetry-instrumentation-django is installed (optional) and
    ``OTEL_PYTHON_DJANGO_INSTRUMENT`` is not ``false``."""
    if _env("OTEL_PYTHON_DJANGO_INSTRUMENT").lower() == "false":
        return
    try:
        # optional dependency: OpenTelemetry, only when tracing is on
        from opentelemetry.instrumentation.django import DjangoInstrumentor
    except ImportError:
        return
    instrumentor = DjangoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument()


def horse_flush():
    """In a work horse about to ``os._exit``: export its spans, waiting ``HORSE_FLUSH_SECONDS`` at most
    (the SDK's ``force_flush`` exports in the calling thread and has no deadline of its own)."""
    provider = _provider
    flush = getattr(provider, "force_flush", None)
    if flush is None:
        return
    thread = threading.Thread(target=flush, name="queues-trace-flush", daemon=True)
    thread.start()
    thread.join(HORSE_FLUSH_SECONDS)


def parent_mode():
    """``QUEUE_TRACE_PARENT``: "link" (default) or "child"; a bad value (check queues.E090) reads as "link"."""
    global _parent
    if _parent is None:
        value = getattr(settings, PARENT_SETTING, "link")
        _parent = value if value in PARENT_MODES else "link"
    return _parent


@receiver(setting_changed)
def forget_parent_mode(setting=None, **kwargs):
    global _parent
    if setting == PARENT_SETTING:
        _parent = None


def validate():
    """queues.E090: ``QUEUE_TRACE_PARENT`` is not one of ``PARENT_MODES``."""

    value = getattr(settings, PARENT_SETTING, "link")
    if value in PARENT_MODES:
        return []
    return [
        Problem(
            "queues.E090",
            f"{PARENT_SETTING} must be 'link' or 'child', got {value!r}.",
            hint="'link' (the default): each attempt's span starts a trace of its own, linked to the "
            "enqueue's; 'child': it joins the enqueue's trace. docs/tracing.md",
        )
    ]
