"""What one scrape knows: a ``QueueSample`` per queue in a ``Snapshot``, filled by ``scrape`` (Redis)
and ``database`` (the database counts), rendered by ``collector``.
"""

from dataclasses import dataclass, field

from queues.connection import info as redisinfo

STATES = ("waiting", "active", "delayed", "paused", "completed", "failed")


@dataclass
class QueueSample:
    """What one scrape knows about one queue."""

    jobs: dict = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    oldest_waiting_seconds: float = 0.0
    workers: int = 0
    durations_ms: list = field(default_factory=list)
    counters: dict | None = None  # None: unknown (Redis error) -> counter samples are left out, not zeroed
    buckets: dict | None = None  # upper bound (s) -> non-cumulative count
    waits: dict | None = None  # the wait histogram: upper bound (s) -> non-cumulative count (None with counters)
    totals: dict | None = None  # the total histogram, the same way
    dead_letters: int = 0
    held: int = 0  # jobs held back by their limit key (queues/producer/limits.py); not a state of ``jobs``
    outbox: int = 0  # jobs accepted and not yet in Redis (queues/producer/outbox.py); not a state of ``jobs`` either
    outbox_oldest_seconds: float = 0.0
    redis_error: bool = False
    database_error: bool = False


@dataclass
class Snapshot:
    queues: dict  # name -> QueueSample
    taken_at: float  # time.time() of the read
    read_seconds: float  # how long the read took
    redis_memory: redisinfo.Memory | None = None  # None: unknown (Redis or INFO failed) -> families left out
    quarantined: dict | None = None  # kind -> entries dropped, set aside or buried (keyspace/repeats.py); None: unknown
    batches: dict | None = None  # (callback queue, state) -> batches (queues/workflows/); None: unknown
    # server name -> its redisinfo.Memory or None (issue 36: each Redis server of the queues); redis_memory is
    # the default server's. None: only redis_memory is known (a snapshot built by hand)
    server_memory: dict | None = None


def text(value):
    # Bytes that are not UTF-8 (planted) are escaped, never raised on: one poison value must not
    # leave every queue out of the scrape.
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


def describe_error(exc):
    # The type and redis' message; redis-py never puts the password in either.
    return f"{type(exc).__name__}: {exc}"
