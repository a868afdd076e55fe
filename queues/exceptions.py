"""Exceptions of the public API (re-exported from ``queues``)."""

from collections.abc import Iterable


class QueuesError(Exception):
    """Base class of every error this app raises."""


class UnknownQueue(QueuesError, KeyError):
    """A queue name that nobody declared. The message lists the declared queues."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        super().__init__(name)

    def __str__(self) -> str:
        known = ", ".join(repr(n) for n in self.known) or "(none)"
        return (
            f"Unknown queue {self.name!r}. Declared queues: {known}. "
            "Declare it in settings.OPTIMA_QUEUES or in a feature app's queues.py (QUEUES = {...})."
        )


class QueueUnavailable(QueuesError):
    """The queues' Redis could not be reached. The message carries the URL with its password masked."""


class InvalidJob(QueuesError, ValueError):
    """An enqueue was refused before anything reached Redis (bad argument, bad option)."""


class NotAJob(QueuesError):
    """A job in Redis names a function (or callback) that is not a declared job (queues/catalog/jobs.py):
    it is never imported; the worker dead-letters it as ``not_a_job``."""


class PermanentError(Exception):
    """Raise from a job to dead-letter it at once: retrying cannot help (a 4xx, bad data)."""


class RetryAfter(Exception):
    """Raise from a job to schedule its next attempt ``seconds`` from now instead of the backoff.

    Typical use: an HTTP 429 answer with a ``Retry-After`` header. See docs/lifecycle.md for how
    it counts against the attempts.
    """

    def __init__(self, seconds: float | str, message: str = "") -> None:
        try:
            seconds = float(seconds)
        except (TypeError, ValueError):
            raise ValueError(f"RetryAfter(seconds) must be a number of seconds >= 0, got {seconds!r}.") from None
        if seconds < 0:
            raise ValueError(f"RetryAfter(seconds) must be a number of seconds >= 0, got {seconds!r}.")
        self.seconds = seconds
        super().__init__(message or f"retry after {seconds:g}s")


class NotReplicated(QueueUnavailable):
    """The job was written on the master, but fewer replicas than ``REDIS_WAIT_REPLICAS`` acknowledged
    it within ``REDIS_WAIT_TIMEOUT_MS``: a failover now could lose it. ``job_written`` is True."""

    job_written = True

    def __init__(self, message: str, *, acknowledged: int, wanted: int) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
        self.wanted = wanted
