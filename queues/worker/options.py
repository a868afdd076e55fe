"""The resilience options (``OPTIMA_QUEUES_OPTIONS``, defaults in ``queues/conf.py``), validated.

One validator, two uses: the system checks ``queues.E060``/``queues.E061`` (``checks.py``) report
its problems, and a worker or scheduler refuses to start with the same message.
"""

from dataclasses import dataclass

from queues import conf


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
    rq_execution_records: bool = False  # RQ_EXECUTION_RECORDS (queues/jobs/execution.py)

    @property
    def recovery_grace(self):
        """Seconds Redis must have been reachable before this process judges other workers dead:
        long enough for every live worker to have beaten again after an outage."""
        return self.liveness_ttl + self.liveness_interval


# key -> (field, minimum, minimum allowed?, whole seconds?)
RULES = {
    "SHUTDOWN_GRACE_SECONDS": ("shutdown_grace", 0, True, False),
    "LIVENESS_INTERVAL_SECONDS": ("liveness_interval", 0, False, False),
    "LIVENESS_TTL_SECONDS": ("liveness_ttl", 1, True, True),
    "ABANDONED_SCAN_SECONDS": ("abandoned_scan", 1, True, True),
    "SCHEDULER_LOCK_SECONDS": ("scheduler_lock", 3, True, True),
    "DEQUEUE_WAIT_SECONDS": ("dequeue_wait", 1, True, True),
    "MULTI_QUEUE_POLL_SECONDS": ("multi_queue_poll", 0, False, False),
    "REDIS_RETRY_MAX_SECONDS": ("redis_retry_max", 0, False, False),
    "OUTCOME_WAIT_SECONDS": ("outcome_wait", 0, True, False),
    "STARTED_ENTRY_TTL_SECONDS": ("started_entry_ttl", 60, True, True),
}


def problems(opts=None):
    """The ``conf.Problem``s of the resilience options; empty when they are fine."""
    opts = conf.options() if opts is None else opts
    found = []
    for key, (_, minimum, inclusive, whole) in RULES.items():
        value = opts.get(key, conf.OPTION_DEFAULTS[key])
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (float(value).is_integer() if whole else True)
        ok = ok and (value >= minimum if inclusive else value > minimum)
        if not ok:
            kind = "a whole number of seconds" if whole else "a number of seconds"
            found.append(
                conf.Problem(
                    "queues.E060",
                    f"OPTIMA_QUEUES_OPTIONS[{key!r}] must be {kind} {'>=' if inclusive else '>'} {minimum}, "
                    f"got {value!r}.",
                    f"Remove it to use the default ({conf.OPTION_DEFAULTS[key]!r}); docs/settings.md explains it.",
                )
            )
    records = opts.get("RQ_EXECUTION_RECORDS", conf.OPTION_DEFAULTS["RQ_EXECUTION_RECORDS"])
    if not isinstance(records, bool):
        found.append(
            conf.Problem(
                "queues.E062",
                f"OPTIMA_QUEUES_OPTIONS['RQ_EXECUTION_RECORDS'] must be True or False, got {records!r}.",
                "True while workers of a release up to 6f24d7d may run on the same Redis and prefix, "
                "False (the default) once none does (docs/settings.md).",
            )
        )
    if not found:
        ttl, interval = opts["LIVENESS_TTL_SECONDS"], opts["LIVENESS_INTERVAL_SECONDS"]
        if ttl < 2 * interval:
            found.append(
                conf.Problem(
                    "queues.E061",
                    f"OPTIMA_QUEUES_OPTIONS['LIVENESS_TTL_SECONDS'] ({ttl!r}) must be at least twice "
                    f"LIVENESS_INTERVAL_SECONDS ({interval!r}): one late beat would make a live worker look dead "
                    "and its job run twice.",
                    "Raise LIVENESS_TTL_SECONDS or lower LIVENESS_INTERVAL_SECONDS (defaults: 10 and 2).",
                )
            )
    return found


def options():
    """The validated ResilienceOptions; ImproperlyConfigured (the check's message) when invalid."""
    opts = conf.options()
    conf.raise_first_error(problems(opts))
    values = {}
    for key, (field, _, _, whole) in RULES.items():
        values[field] = int(opts[key]) if whole else float(opts[key])
    return ResilienceOptions(**values, rq_execution_records=opts["RQ_EXECUTION_RECORDS"])
