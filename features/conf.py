"""Settings of the feature modules, read in one place, with units.

Each value comes from ``django.conf.settings`` when set there, else from the environment variable
of the same name, else the default below (so a worker started with ``MARKETPLACE_READ_TIMEOUT=1``
needs no settings change). docs/api.md lists them.
"""

import os

from django.conf import settings

DEFAULTS = {
    "MARKETPLACE_URL": "http://127.0.0.1:8765",  # base URL of the marketplace API
    "MARKETPLACE_TOKEN": "",  # bearer token sent to the marketplace; a secret: never logged
    "MARKETPLACE_CONNECT_TIMEOUT": 2.0,  # seconds to open a connection
    "MARKETPLACE_READ_TIMEOUT": 10.0,  # seconds to wait for each read of the answer
    "MARKETPLACE_RATE_LIMIT": "5/second",  # per cabinet, shared by all workers ('limits' notation)
    "MARKETPLACE_RATE_LIMIT_MAX_WAIT": 2.0,  # seconds a job waits for a slot before RetryAfter
    "MARKETPLACE_RETRY_AFTER_MAX": 3600.0,  # seconds; a longer Retry-After is capped to this
    "MARKETPLACE_PAGE_SIZE": 100,  # orders per page requested
    "CONTENT_GENERATION_SECONDS": 8.0,  # simulated duration of one content generation
    "CONTENT_TIMEOUT": 120,  # seconds one content generation attempt may run
    "ORDERS_SYNC_CABINETS": None,  # cabinets synced periodically; None: 1,2,3,4 in dev, none elsewhere
    "ORDERS_SYNC_INTERVAL": None,  # seconds between two syncs of a cabinet; None: 60 in dev, 300 elsewhere
    "REPRICER_DEBOUNCE_SECONDS": 10.0,  # seconds: a product's price edits closer than this are one push
    "REPRICER_DEBOUNCE_MAX_SECONDS": 60.0,  # seconds: a stream of edits still pushes at least this often
    "REPRICER_RATE": "5/s",  # price pushes started per owner, all workers together (limit_rate notation)
}

_TYPES = {k: type(v) for k, v in DEFAULTS.items() if v is not None}
_TYPES["ORDERS_SYNC_INTERVAL"] = int


def get(name):
    """The value of one feature setting (see DEFAULTS)."""
    if name not in DEFAULTS:
        raise KeyError(f"Unknown feature setting {name!r}; known: {', '.join(DEFAULTS)}.")
    value = getattr(settings, name, None)
    if value is None:
        raw = os.environ.get(name)
        if raw is None or raw == "":
            return DEFAULTS[name]
        value = raw
    kind = _TYPES.get(name)
    if isinstance(value, str) and kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            raise ValueError(f"{name} must be a number, got {value!r}.") from None
    return value


def sync_cabinets():
    """Cabinet ids synced on a schedule: ORDERS_SYNC_CABINETS ('1,2,3' or a list), dev default 1-4."""
    value = get("ORDERS_SYNC_CABINETS")
    if value is None:
        return [1, 2, 3, 4] if getattr(settings, "OPTIMA_ENV", "prod") == "dev" else []
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",") if p.strip()]
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise ValueError(f"ORDERS_SYNC_CABINETS must be comma-separated cabinet ids, got {value!r}.") from None
    return [int(v) for v in value]


def sync_interval():
    """Seconds between two periodic syncs of a cabinet (ORDERS_SYNC_INTERVAL).

    Dev defaults to 60 s: ``dev.py run`` shows the first syncs a minute after it starts (a schedule's
    first run is one interval after registration), and its demo's six job lines a sync round (four
    cabinets, two retried) stay under ten log lines a minute (docs/operations.md#logs); elsewhere
    every 5 minutes.
    """
    value = get("ORDERS_SYNC_INTERVAL")
    if value is None:
        return 60 if getattr(settings, "OPTIMA_ENV", "prod") == "dev" else 300
    return int(value)
