"""Living through Redis outages: which errors mean "Redis is away", and how to wait for it.

Every long-lived process of the queue system (worker, work horse, RQ's scheduler, rq-scheduler)
treats these errors as "wait and try again", never as a reason to quit or to fail a job. The waits
back off from half a second to ``REDIS_RETRY_MAX_SECONDS`` (5 s by default), so a 30 s outage is
noticed to be over within a few seconds of its end. The log says once that Redis went away, then
at most every 30 s that it still is, then once that it is back and after how long.
"""

import logging
import time

import redis

# A refused or dropped connection, a socket timeout, and a restarting server still loading its
# data set (BusyLoadingError is a ConnectionError).
REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

REPEAT_LOG_SECONDS = 30


class Backoff:
    """Delays of 0.5, 1, 2, 4 ... seconds, capped at ``cap`` seconds."""

    def __init__(self, cap, first=0.5):
        self.cap = max(float(cap), 0.05)
        self.first = min(first, self.cap)
        self._next = self.first

    def next(self):
        delay, self._next = self._next, min(self._next * 2, self.cap)
        return delay

    def reset(self):
        self._next = self.first


class OutageLog:
    """Logs an outage once when it starts, every REPEAT_LOG_SECONDS while it lasts, once when it ends."""

    def __init__(self, logger, what):
        self.logger = logger
        self.what = what  # e.g. "Worker 1f3c…" or "RQ scheduler"
        self.since = None
        self.episodes = 0  # outages seen so far
        self._last_log = 0.0

    def failed(self, exc, doing=""):
        now = time.monotonic()
        doing = f" while trying to {doing}" if doing else ""
        if self.since is None:
            self.since = self._last_log = now
            self.episodes += 1
            self.logger.warning(
                "%s: Redis is unavailable (%s: %s)%s; retrying until it is back",
                self.what,
                type(exc).__name__,
                exc,
                doing,
            )
        elif now - self._last_log >= REPEAT_LOG_SECONDS:
            self._last_log = now
            self.logger.warning(
                "%s: Redis still unavailable after %.0f s (%s)%s",
                self.what,
                now - self.since,
                type(exc).__name__,
                doing,
            )

    def ok(self):
        if self.since is not None:
            self.logger.warning("%s: Redis is back after %.1f s", self.what, time.monotonic() - self.since)
            self.since = None


def sleep(seconds, should_stop=None, step=0.2):
    """Sleep ``seconds``, waking early when ``should_stop()`` becomes true (checked every ``step`` s)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or (should_stop is not None and should_stop()):
            return
        time.sleep(min(step, left))


def wait_until_reachable(connection, backoff, outage, *, should_stop=None, deadline=None):
    """PING ``connection`` until it answers: True; False when ``should_stop()`` turns true or the
    monotonic ``deadline`` passes first."""
    while True:
        try:
            connection.ping()
        except REDIS_ERRORS as exc:
            outage.failed(exc)
        else:
            outage.ok()
            backoff.reset()
            return True
        if (should_stop is not None and should_stop()) or (deadline is not None and time.monotonic() >= deadline):
            return False
        delay = backoff.next()
        if deadline is not None:
            delay = max(0.0, min(delay, deadline - time.monotonic()))
        sleep(delay, should_stop)


def retry_while_unavailable(func, backoff, outage, *, doing="", give_up_after=None, should_stop=None):
    """Call ``func()`` until it runs without a Redis error; return its value. With ``give_up_after``
    seconds, re-raise the last Redis error once they have passed; likewise as soon as
    ``should_stop()`` is true."""
    started = time.monotonic()
    while True:
        try:
            value = func()
        except REDIS_ERRORS as exc:
            outage.failed(exc, doing)
            if give_up_after is not None and time.monotonic() - started >= give_up_after:
                raise
            if should_stop is not None and should_stop():
                raise
            sleep(backoff.next(), should_stop)
            continue
        outage.ok()
        backoff.reset()
        return value


logger = logging.getLogger("queues.resilience")
