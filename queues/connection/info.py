"""The queues' Redis and its memory: what it does when it is full, and how full it is.

A Redis that reaches its ``maxmemory`` applies its ``maxmemory-policy``:

- ``noeviction``: writes fail. An enqueue raises ``QueueUnavailable`` (the caller knows: 503), a
  worker retries its Redis writes; nothing already accepted is lost. The only safe policy here.
- ``allkeys-*`` (lru, lfu, random): Redis deletes *any* key — a waiting job's hash, a queue list, a
  registry — and that job is gone without an error anywhere: system check error ``queues.E070``
  and a ``/healthz`` failure.
- ``volatile-*`` (lru, lfu, random, ttl): Redis deletes keys that carry a TTL: the liveness keys
  and registrations of workers (a live worker looks dead, its job is re-queued and runs twice), the
  schedulers' locks, finished and failed jobs kept for ``result_ttl`` / ``failure_ttl`` (their
  results and tracebacks), the unique-enqueue keys (a duplicate can then be enqueued): warning
  ``queues.W071``.

The policy is read from ``INFO memory`` (``maxmemory_policy``), never ``CONFIG GET``, which managed
Redis services refuse. An unreachable Redis (or one that refuses INFO) makes the check say nothing:
``/healthz`` and the metrics report an unreachable Redis, and ``manage.py check`` must not fail on
a machine without one (a Docker build running ``collectstatic``).
"""

from dataclasses import dataclass

import redis
from django.core.exceptions import ImproperlyConfigured

from queues import conf
from queues.conf import Problem
from queues.connection.clients import mask_url, probe_client, queues_url
from queues.connection.factory import make_client

POLICY_IDS = {"allkeys": "queues.E070", "volatile": "queues.W071"}


@dataclass(frozen=True)
class Memory:
    """What ``INFO memory`` and ``INFO stats`` say (bytes; ``max_bytes`` 0 means no limit)."""

    used_bytes: int
    max_bytes: int
    policy: str
    evicted_keys: int  # since the server started (a counter: a restart resets it)


def parse(memory, stats):
    """A Memory from redis-py's parsed ``INFO memory`` and ``INFO stats`` dicts."""
    return Memory(
        used_bytes=int(memory.get("used_memory", 0)),
        max_bytes=int(memory.get("maxmemory", 0)),
        policy=str(memory.get("maxmemory_policy", "")),
        evicted_keys=int(stats.get("evicted_keys", 0)),
    )


def add_reads(pipe):
    """Add the two reads of ``parse`` to a pipeline (the metrics' first round trip)."""
    pipe.info("memory")
    pipe.info("stats")


def read(client):
    """One round trip: the Memory of ``client``'s server. Raises redis errors."""
    pipe = client.pipeline(transaction=False)
    add_reads(pipe)
    memory, stats = pipe.execute()
    return parse(memory, stats)


def evicts_any_key(policy):
    return isinstance(policy, str) and policy.startswith("allkeys-")


def policy_problems(policy, url):
    """The check's problems for the ``maxmemory-policy`` ``policy`` of the queues' Redis at ``url``
    (masked). Pure: ``validate`` reads the policy."""

    fix = (
        "Set maxmemory-policy noeviction on the queues' Redis (redis.conf, CONFIG SET, or the managed "
        "service's parameter group) and give the cache its own Redis (CACHE_REDIS_URL) if it should evict; "
        "see docs/operations.md#redis-memory-and-eviction."
    )
    if evicts_any_key(policy):
        return [
            Problem(
                POLICY_IDS["allkeys"],
                f"The queues' Redis ({url}) has maxmemory-policy {policy}: when it reaches maxmemory it "
                "deletes any key, waiting jobs, queue lists and registries included, and those jobs are "
                "lost without an error.",
                fix,
            )
        ]
    if isinstance(policy, str) and policy.startswith("volatile-"):
        return [
            Problem(
                POLICY_IDS["volatile"],
                f"The queues' Redis ({url}) has maxmemory-policy {policy}: when it reaches maxmemory it "
                "deletes keys that carry a TTL: worker liveness keys and registrations (a live worker "
                "looks dead and its job runs again), scheduler locks, finished and failed jobs kept for "
                "result_ttl / failure_ttl, and unique-enqueue keys (a duplicate can be enqueued).",
                fix,
                level="warning",
            )
        ]
    return []


def validate(url=None, timeout=None):
    """queues.E070 / W071 for the queues' Redis; [] when it is fine, unreachable or refuses INFO."""
    timeout = conf.options()["HEALTH_TIMEOUT"] if timeout is None else timeout
    try:
        if url is None:  # the queues' Redis, through the sentinels when there are some
            url = queues_url()
            client = probe_client("queues", timeout)
        else:
            client = make_client(url, timeout=timeout)
    except (ValueError, ImproperlyConfigured):  # a malformed URL or sentinel list: E040/E041 report it
        return []
    try:
        policy = client.info("memory").get("maxmemory_policy")
    except redis.RedisError:
        return []
    finally:
        client.close()
    return policy_problems(policy, mask_url(url))
