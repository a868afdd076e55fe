"""Redis: clients (``clients``), Sentinel and failover, replication (WAIT), INFO, and what an
outage looks like (``outage``).

``queues.connection.RQQueuesSetting`` (``RQ_QUEUES``) and
``queues.connection.MaskingExceptionReporterFilter`` (``DEFAULT_EXCEPTION_REPORTER_FILTER``) are what
settings name.
"""

# Imported on first use (PEP 562), so that importing a sibling module never imports this whole package.
_EXPORTS = {
    "RQQueuesSetting": "queues.connection.clients",
    "MaskingExceptionReporterFilter": "queues.connection.clients",
}


def __getattr__(name):
    if name in _EXPORTS:
        import importlib

        value = globals()[name] = getattr(importlib.import_module(_EXPORTS[name]), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
