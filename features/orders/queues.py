"""The order sync's queue, and its schedules: one periodic sync per seller cabinet.

Cabinets come from ORDERS_SYNC_CABINETS (features/conf.py): 1-4 in dev, so the run command shows
syncs flowing against the fake marketplace's demo (cabinet 2 answers 429, 3 answers 500, 4's first
sync dead-letters); none elsewhere unless configured. Interval: ORDERS_SYNC_INTERVAL (60 s in dev).
"""

from features import conf

# limit_concurrency: at most 2 syncs of one owner queued or running at once (the API keys each
# sync by its owner, features/api.py); the periodic syncs have no owner and no limit.
QUEUES = {"orders-sync": {"limit_concurrency": 2}}

SCHEDULES = [
    {
        "id": f"orders-sync-cabinet-{cabinet}",
        "queue": "orders-sync",
        "func": "features.orders.jobs.sync_cabinet",
        "args": [cabinet],
        "interval": conf.sync_interval(),
    }
    for cabinet in conf.sync_cabinets()
]
