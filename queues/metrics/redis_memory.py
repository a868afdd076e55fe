"""The queues' Redis servers in the scrape: its ``INFO memory`` / ``INFO stats`` replies (read in the
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


def families(memories, prefix):
    """Each server's memory (queues/connection/info.py), ``memories``: {server name: Memory or None}, labelled
    ``server`` (``default``, or a name of QUEUES_REDIS_SERVERS). A server whose memory is unknown is left out."""
    p = f"{prefix}_redis"
    used = GaugeMetricFamily(
        f"{p}_memory_used_bytes", "Memory the queues' Redis uses (INFO memory used_memory).", labels=["server"]
    )
    limit = GaugeMetricFamily(
        f"{p}_memory_max_bytes", "maxmemory of the queues' Redis; 0 means no limit.", labels=["server"]
    )
    evicted = CounterMetricFamily(
        f"{p}_evicted_keys",
        "Keys the queues' Redis evicted since it started (INFO stats evicted_keys); with noeviction it stays 0.",
        labels=["server"],
    )
    for server, memory in memories.items():
        if memory is not None:
            used.add_metric([server], memory.used_bytes)
            limit.add_metric([server], memory.max_bytes)
            evicted.add_metric([server], memory.evicted_keys)
    return [used, limit, evicted]
