"""OpenTelemetry tracing of jobs: a PRODUCER span per enqueue, a CONSUMER span per attempt.

Off, and free, unless the process is configured for it (``setup.py``): then ``queues.enqueue``
(``enqueue_call``, ``enqueue_many``, the Tasks backend, the outbox's pushes) opens ``send <queue>``
and stores the W3C trace context in the job hash field ``optima_trace`` (``carrier.py``: never in the
signed ``data``, so the signature of a job is the same with tracing on or off), and each attempt a
worker runs opens ``process <queue>``, linked to that context or its child (``QUEUE_TRACE_PARENT``,
``spans.py``). docs/tracing.md tells the operator's side.

Modules: ``setup`` (the provider, from the environment), ``spans``, ``carrier`` (the context in the job
hash), ``hook`` (the worker's hook: a span per attempt) and ``checks`` (queues.E090).

``on`` is the one check the enqueue and per-job paths make while tracing is off: nothing of
OpenTelemetry is imported then. ``setup.from_env()`` (the app's ``ready()``) and ``refresh()`` set it.
"""

on = False  # True: spans are made (setup.py decides); read as ``tracing.on`` on every enqueue and attempt


def refresh():
    """Decide again whether to trace, from the environment and the process's tracer provider: for a
    process that sets its own provider after Django started (``docs/tracing.md``)."""
    from queues.tracing import setup  # a cycle avoided: setup imports this module (its switch, ``on``)

    setup.from_env()
    return on
