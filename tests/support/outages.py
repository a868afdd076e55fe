"""Redis outages: a private redis-server that keeps its data across a stop, and the outage length the system
must live through (tests/queues/resilience/test_outages.py, worker/test_no_fork.py)."""

import redis
from rq.job import JobStatus

from devtools.redis_server import RedisServer
from tests.support.lifecycle import fetch

OUTAGE_SECONDS = 30  # the longest outage the system must live through


class DurableRedisServer(RedisServer):
    """A private redis-server that keeps its data across stop()/start(), like a production server
    with persistence: it writes a snapshot when stopped (SIGTERM) and loads it when started."""

    def start(self, timeout=10):
        super().start(timeout)
        client = redis.Redis(port=self.port)
        client.config_set("save", "3600 1")  # a save point makes SIGTERM write the snapshot
        client.close()
        return self


def finished(job_id, client):
    from rq.exceptions import NoSuchJobError

    try:
        return fetch(job_id, client).get_status() == JobStatus.FINISHED
    except (redis.RedisError, NoSuchJobError):  # Redis still away, or the job not written yet
        return False
