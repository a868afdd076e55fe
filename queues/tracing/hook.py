"""The tracing's side of the worker (``queues/events/hooks.py``): each attempt's ``process <queue>``
span (``spans.py``), its error, and a work horse's spans exported before it leaves. While tracing is
off (``queues.tracing.on``) each point is one attribute read, and OpenTelemetry is never imported."""

from queues import tracing
from queues.events.hooks import Hook
from queues.tracing import setup


class TracingHook(Hook):
    name = "tracing"

    def processing(self, job):
        if not tracing.on:
            return None
        from queues.tracing import spans  # optional dependency: spans imports OpenTelemetry

        return spans.processing(job)  # the attempt's CONSUMER span

    def after_raise(self, job, exc_info):
        if tracing.on:
            from queues.tracing import spans  # optional dependency: spans imports OpenTelemetry

            spans.failed(exc_info[0])

    def horse_exit(self):
        if tracing.on:  # the horse leaves with os._exit: its spans are exported first
            setup.horse_flush()
