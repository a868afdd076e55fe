"""The order sync's queue, and its schedule: a periodic batch of one sync per seller cabinet.

Cabinets come from ORDERS_SYNC_CABINETS (features/conf.py): 1-4 in dev, so the run command shows
syncs flowing against the fake marketplace's demo (cabinet 2 answers 429, 3 answers 500, 4's first
sync dead-letters); none elsewhere unless configured. Interval: ORDERS_SYNC_INTERVAL (60 s in dev).
"""

from features import conf

# limit_concurrency: at most 2 syncs of one key queued or running at once: the API keys each sync by its
# owner (features/api.py), the periodic sync by its cabinet; and each key's syncs start no faster than
# MARKETPLACE_RATE_LIMIT (limit_rate, features/orders/jobs.py sync_options).
QUEUES = {"orders-sync": {"limit_concurrency": 2}}

# One schedule: each run opens a batch of one sync per cabinet (per seller), whose on_success rebuilds
# the seller's report (features/orders/jobs.py: sync_cabinets).
SCHEDULES = (
    [
        {
            "id": "orders-sync-cabinets",
            "queue": "orders-sync",
            "func": "features.orders.jobs.sync_cabinets",
            "args": [conf.sync_cabinets()],
            "interval": conf.sync_interval(),
        }
    ]
    if conf.sync_cabinets()
    else []
)
