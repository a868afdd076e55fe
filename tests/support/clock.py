"""The waits that are a time and not a condition, each named for the rule it serves.

Everywhere else a test waits for an event (``tests.support.wait_for``). Two things are a length of time by
definition: an outage the system must live through (30 s, tests/support/outages.py), and rq's rule that a
stop signal repeated within 1 s of the first is the same stop delivered twice."""

import time

RQ_REPEAT_WINDOW_SECONDS = 1.0  # rq's Worker.request_force_stop ignores a second signal sooner than this


def hold_until(moment):
    """Return at ``moment`` (a ``time.monotonic()`` reading), at once when it has passed."""
    time.sleep(max(0.0, moment - time.monotonic()))  # a length of time is the point: an outage, rq's 1 s window


def hold_outage(since, seconds):
    """Keep the outage that began at ``since`` (``time.monotonic()``) going until ``seconds`` of it have passed:
    how long Redis stays away is what an outage test is about."""
    hold_until(since + seconds)


def past_rqs_repeat_window(since=None):
    """Return once a repeated stop signal counts as a second stop for rq: a little over 1 s after ``since``,
    the moment the test saw the worker handle the first one (now when None)."""
    hold_until((time.monotonic() if since is None else since) + RQ_REPEAT_WINDOW_SECONDS + 0.2)
