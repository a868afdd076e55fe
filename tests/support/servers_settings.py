"""Settings of worker processes in the tests of several Redis servers (issue 36): the site's, plus the queues
``on-b`` and ``on-b-2`` on the server ``b``, whose URL the environment gives (``REDIS_SERVERS``, JSON, read by
the site's settings). Tests declare the same in-process with the ``second_redis`` fixture."""

from optima_site.settings import *  # noqa: F401,F403
from optima_site.settings import OPTIMA_QUEUES

SERVER_B_QUEUES = {"on-b": {"redis": "b"}, "on-b-2": {"redis": "b", "attempts": 2, "backoff": 0.1}}
OPTIMA_QUEUES = dict(OPTIMA_QUEUES, **SERVER_B_QUEUES)
