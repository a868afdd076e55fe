"""Settings of bench/servers.py's processes: the site's, plus a queue ``bench-b`` on the Redis server ``b`` when
the environment names that server (``REDIS_SERVERS``: the run with two servers)."""

import os

from optima_site.settings import *  # noqa: F401,F403
from optima_site.settings import OPTIMA_QUEUES

if os.environ.get("REDIS_SERVERS"):
    OPTIMA_QUEUES = dict(OPTIMA_QUEUES, **{"bench-b": {"redis": "b"}})
