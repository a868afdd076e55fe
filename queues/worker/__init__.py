"""The worker: the rq adapter (``adapter``, a map of rq's overrides) and the plain objects it hands
over to: stop requests (``stop``), the intake of jobs (``intake`` over the atomic pop, ``dequeue``),
one attempt (``attempt``, ``horse``; ``fastpath``: the fork-free worker's start and success in one call
each), one job's process (``supervision``, ``settle``, ``inprocess``; ``kernel``: children that die with
their parent), the housekeeping (``housekeeping``), liveness and the abandoned-job scan (``liveness``,
``abandoned``), its options and their checks (``options``, ``checks``). ``pause`` and ``signals`` are
old paths of ``queues/catalog/pause.py`` and ``queues/events/signals.py``; the worker calls its
concerns through ``queues/events/hooks.py``.

``queues.worker.OptimaWorker`` and ``queues.worker.OptimaSimpleWorker`` are the dotted paths settings
(``RQ['WORKER_CLASS']``) and ``rqworker --worker-class`` name; ``queues.worker.OptimaConcurrentWorker``
(``concurrent``, over ``slots`` and ``watchdog``) is what ``rqworker --concurrency N`` runs, and
``queues.worker.OptimaAsyncWorker`` (``asyncworker``, over ``eventloop``: the concurrent worker with one event
loop for the ``async def`` jobs) what ``rqworker --async N`` runs.
"""

import importlib

# Imported on first use (PEP 562), so that importing a sibling module never imports this whole package.
_EXPORTS = {
    "OptimaWorker": "queues.worker.adapter",
    "OptimaSimpleWorker": "queues.worker.adapter",
    "OptimaConcurrentWorker": "queues.worker.concurrent",
    "OptimaAsyncWorker": "queues.worker.asyncworker",
}


def __getattr__(name):
    if name in _EXPORTS:
        value = globals()[name] = getattr(importlib.import_module(_EXPORTS[name]), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
