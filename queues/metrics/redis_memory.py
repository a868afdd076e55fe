"""The queues' Redis server in the scrape: its ``INFO memory`` / ``INFO stats`` replies (read in the
scrape's first round trip, parsed by queues/connection/info.py) and the ``optima_redis_*`` families.
A Redis that refuses INFO (an ACL without it) only loses these families: left out, not zeroed.
"""

import logging

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from queues.connection import info as redisinfo
from queues.metrics.snapshot import describe_error

logger = logging.getLogger("queues.metrics")


def from_replies(memory_info, stats_info):
    """The ``redisinfo.Memory`` of the two INFO replies, or None (logged) when either failed."""
    errors = [r for r in (memory_info, stats_info) if isinstance(r, Exception)]
    if errors:
        logger.warning(
            "reading the Redis memory (INFO) failed (%s); the redis memory metrics are left out",
            describe_error(errors[0]),
        )
        return None
    try:
        return redisinfo.parse(memory_info, stats_info)
    except (TypeError, ValueError, AttributeError) as exc:
        logger.warning(
            "the Redis INFO answer is not understood (%s); the redis memory metrics are left out", describe_error(exc)
        )
        return None


def families(memory, prefix):
    """The server's memory (queues/connection/info.py): no labels, one Redis. Empty families when unknown."""
    p = f"{prefix}_redis"
    used = GaugeMetricFamily(f"{p}_memory_used_bytes", "Memory the queues' Redis uses (INFO memory used_memory).")
    limit = GaugeMetricFamily(f"{p}_memory_max_bytes", "maxmemory of the queues' Redis; 0 means no limit.")
    evicted = CounterMetricFamily(
        f"{p}_evicted_keys",
        "Keys the queues' Redis evicted since it started (INFO stats evicted_keys); with noeviction it stays 0.",
    )
    if memory is not None:
        used.add_metric([], memory.used_bytes)
        limit.add_metric([], memory.max_bytes)
        evicted.add_metric([], memory.evicted_keys)
    return [used, limit, evicted]
