"""Redis: how every client is built (``factory``), the app's clients (``clients``), django-rq's view of
them (``djangorq``), Sentinel (``sentinel``) and failover (``failover``), replication (WAIT:
``replication``), the server's memory and INFO (``info``), a pipeline run as one Lua call (``batch``),
what an outage looks like (``outage``), and error pages without passwords (``masking``).

``queues.connection.RQQueuesSetting`` (``RQ_QUEUES``),
``queues.connection.MaskingExceptionReporterFilter`` (``DEFAULT_EXCEPTION_REPORTER_FILTER``) and
``queues.connection.MaskingExceptionReporter`` (``DEFAULT_EXCEPTION_REPORTER``) are what settings name.
"""

import importlib

# Imported on first use (PEP 562), so that importing a sibling module never imports this whole package.
_EXPORTS = {
    "RQQueuesSetting": "queues.connection.djangorq",
    "MaskingExceptionReporterFilter": "queues.connection.masking",
    "MaskingExceptionReporter": "queues.connection.masking",
}


def __getattr__(name):
    if name in _EXPORTS:
        value = globals()[name] = getattr(importlib.import_module(_EXPORTS[name]), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
