"""A per-cabinet rate limiter shared by every worker: the ``limits`` library's moving window in
Redis, on the *cache* connection (``queues.cache_connection()``), never the queues'
one, so a worker's blocking pop can never hold up a limiter check (ADR 0007's reason for a
dedicated queue connection).

Keys: ``<QUEUE_PREFIX>:features:ratelimit:LIMITER/<scope>/<amount>/<multiples>/<granularity>`` —
inside the environment prefix, as every key of this project must be (the test suite's Redis user
may touch nothing else). No hand-written Lua: ``limits`` ships its scripts.

When the window is full the caller waits for a slot, at most ``MARKETPLACE_RATE_LIMIT_MAX_WAIT``
seconds; past that the job hands its worker back with ``queues.RetryAfter`` for the time the
window needs, instead of pinning a worker while it waits.
"""

import math
import time

from django.conf import settings
from limits import parse
from limits.storage import RedisStorage
from limits.strategies import MovingWindowRateLimiter

import queues

from .. import conf


def key_prefix():
    return f"{settings.QUEUE_PREFIX}:features:ratelimit"


class RateLimited(queues.RetryAfter):
    """No slot within the wait allowed: the job is retried when the window has room."""


class CabinetRateLimiter:
    """``acquire(scope)`` blocks until ``rate`` allows one more request for ``scope``."""

    def __init__(self, rate=None, *, max_wait=None, connection=None):
        rate = rate or conf.get("MARKETPLACE_RATE_LIMIT")
        try:
            self.item = parse(rate)
        except ValueError:
            raise ValueError(f"MARKETPLACE_RATE_LIMIT must be like '5/second' or '100/minute', got {rate!r}.") from None
        self.rate = rate
        self.max_wait = conf.get("MARKETPLACE_RATE_LIMIT_MAX_WAIT") if max_wait is None else max_wait
        client = connection or queues.cache_connection()
        self.storage = RedisStorage("redis://", connection_pool=client.connection_pool, key_prefix=key_prefix())
        self.limiter = MovingWindowRateLimiter(self.storage)

    def try_acquire(self, scope):
        """One slot now, or the seconds until the window has room (0.0 means acquired)."""
        if self.limiter.hit(self.item, str(scope)):
            return 0.0
        stats = self.limiter.get_window_stats(self.item, str(scope))
        return max(0.01, stats.reset_time - time.time())

    def acquire(self, scope):
        deadline = time.monotonic() + self.max_wait
        while True:
            wait = self.try_acquire(scope)
            if wait == 0.0:
                return
            if time.monotonic() + wait > deadline:
                raise RateLimited(
                    math.ceil(wait), f"marketplace rate limit {self.rate} for {scope} reached; retry in {wait:.1f}s"
                )
            time.sleep(wait)
