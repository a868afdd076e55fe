"""The names of a limit key, shared by the concurrency limit (queues/producer/limits.py) and the rate limit
(queues/producer/rates.py): what a ``limit_key`` may be (``key_problem``), its scoping to a queue (``scoped``,
``split``: rq's key ``<queue>:<limit key>``, which both keep their sets under) and whether a job goes through
its key (``is_limited``, ``goes_through_limit``). A leaf: ``limits`` imports ``rates``, and both import this
module, so neither imports the other back. ``limits`` re-exports these names (``limits.scoped`` ...).
"""

MAX_KEY_LENGTH = 200
# rq names the sets of key K "K:allowed" and "K:rate_limited", next to K's own hash "K": a limit key
# ending in one of these would share its keys with another limit key's (and break on WRONGTYPE).
RESERVED_SUFFIXES = (":allowed", ":rate_limited")


def key_problem(value):
    """Why ``value`` cannot be a ``limit_key`` (a sentence), or None."""
    if not isinstance(value, str):
        return f"must be a string (e.g. 'seller:42'), not {type(value).__name__}"
    if not value:
        return "must not be empty"
    if len(value) > MAX_KEY_LENGTH:
        return f"must be at most {MAX_KEY_LENGTH} characters, got {len(value)}"
    if value != value.strip() or any(ch.isspace() or not ch.isprintable() for ch in value):
        return "must not contain spaces, control or other non-printable characters"
    if value.endswith(RESERVED_SUFFIXES):
        return f"must not end in {' or '.join(RESERVED_SUFFIXES)} (rq's own names for a key's sets)"
    return None


def scoped(queue_name, limit_key):
    """rq's rate-limit key of ``limit_key`` on queue ``queue_name``: the same key on two queues is
    two limits."""
    return f"{queue_name}:{limit_key}"


def split(scoped_key):
    """(queue name, limit key) of an rq rate-limit key written by ``scoped``."""
    queue_name, _, limit_key = scoped_key.partition(":")
    return queue_name, limit_key


def is_limited(job):
    """The job has a concurrency limit (rq's limit fields)."""
    return bool(getattr(job, "has_rate_limit", False))


def goes_through_limit(job):
    """The job is written through its limit key: a concurrency limit, a rate (queues/producer/rates.py) or both."""
    return is_limited(job) or isinstance((getattr(job, "meta", None) or {}).get("limit_rate"), dict)
