"""The resilience options (``OPTIMA_QUEUES_OPTIONS``, defaults in ``queues/conf.py``), validated.

Read once per process start (worker, scheduler); a bad value stops the start with a message that
names the option, the value and the fix.
"""
from dataclasses import dataclass

from django.core.exceptions import ImproperlyConfigured

from .. import conf


@dataclass(frozen=True)
class ResilienceOptions:
    shutdown_grace: float  # SHUTDOWN_GRACE_SECONDS
    liveness_interval: float  # LIVENESS_INTERVAL_SECONDS
    liveness_ttl: float  # LIVENESS_TTL_SECONDS
    abandoned_scan: float  # ABANDONED_SCAN_SECONDS
    scheduler_lock: int  # SCHEDULER_LOCK_SECONDS
    dequeue_wait: int  # DEQUEUE_WAIT_SECONDS
    multi_queue_poll: float  # MULTI_QUEUE_POLL_SECONDS
    redis_retry_max: float  # REDIS_RETRY_MAX_SECONDS
    outcome_wait: float  # OUTCOME_WAIT_SECONDS
    started_entry_ttl: int  # STARTED_ENTRY_TTL_SECONDS

    @property
    def recovery_grace(self):
        """Seconds Redis must have been reachable before this process judges other workers dead:
        long enough for every live worker to have beaten again after an outage."""
        return self.liveness_ttl + self.liveness_interval


def _number(opts, key, *, minimum, allow_equal=True, integer=False):
    value = opts[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value).is_integer()
    if ok:
        ok = value >= minimum if allow_equal else value > minimum
    if not ok:
        kind = "a whole number of seconds" if integer else "a number of seconds"
        bound = f">= {minimum}" if allow_equal else f"> {minimum}"
        raise ImproperlyConfigured(
            f"OPTIMA_QUEUES_OPTIONS[{key!r}] must be {kind} {bound}, got {value!r}. "
            f"Remove it to use the default ({conf.OPTION_DEFAULTS[key]!r}); docs/settings.md explains it."
        )
    return int(value) if integer else float(value)


def options():
    opts = conf.options()
    result = ResilienceOptions(
        shutdown_grace=_number(opts, "SHUTDOWN_GRACE_SECONDS", minimum=0),
        liveness_interval=_number(opts, "LIVENESS_INTERVAL_SECONDS", minimum=0, allow_equal=False),
        liveness_ttl=_number(opts, "LIVENESS_TTL_SECONDS", minimum=1, integer=True),
        abandoned_scan=_number(opts, "ABANDONED_SCAN_SECONDS", minimum=1, integer=True),
        scheduler_lock=_number(opts, "SCHEDULER_LOCK_SECONDS", minimum=3, integer=True),
        dequeue_wait=_number(opts, "DEQUEUE_WAIT_SECONDS", minimum=1, integer=True),
        multi_queue_poll=_number(opts, "MULTI_QUEUE_POLL_SECONDS", minimum=0, allow_equal=False),
        redis_retry_max=_number(opts, "REDIS_RETRY_MAX_SECONDS", minimum=0, allow_equal=False),
        outcome_wait=_number(opts, "OUTCOME_WAIT_SECONDS", minimum=0),
        started_entry_ttl=_number(opts, "STARTED_ENTRY_TTL_SECONDS", minimum=60, integer=True),
    )
    if result.liveness_ttl < 2 * result.liveness_interval:
        raise ImproperlyConfigured(
            f"OPTIMA_QUEUES_OPTIONS['LIVENESS_TTL_SECONDS'] ({result.liveness_ttl:g}) must be at least twice "
            f"LIVENESS_INTERVAL_SECONDS ({result.liveness_interval:g}): one late beat would otherwise make a live "
            "worker look dead and its job run twice. Raise the TTL or lower the interval."
        )
    return result
