"""Lists that refresh themselves while a page is open (issue 33), as Sidekiq's Web and bull-board do.

``queues/static/queues/live.js`` (plain JavaScript, no build step) polls every ``refresh_seconds()``: a job
list's JSON (``lists.job_list`` with ``?format=json``: its counts, rows, and its ``data-live`` regions
rendered by the page's own partials), or the page itself (the home and queue pages: the same regions cut
from the HTML). It keeps the operator's checked boxes, pauses while the tab is hidden, and has a "Live:
on/off" toggle remembered in the browser's localStorage. A poll is a page: the same access, the same at most
5 Redis round trips.

``QUEUE_BOARD_REFRESH_SECONDS`` (whole seconds, default 5; 0 turns it off: no script, no toggle) is read
here only; a value that cannot be used is the system check ``queues.E029`` (``validate``), and the pages
then do not refresh (never a 500).
"""

from django.conf import settings

from queues.conf import Problem

SETTING = "QUEUE_BOARD_REFRESH_SECONDS"
DEFAULT = 5  # seconds between two polls of an open page
MAX_SECONDS = 3600


def _is_seconds(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SECONDS


def refresh_seconds():
    """Seconds between two polls, 0 for none (also for a value ``validate`` refuses)."""
    value = getattr(settings, SETTING, DEFAULT)
    return value if _is_seconds(value) else 0


def validate():
    """Problems of QUEUE_BOARD_REFRESH_SECONDS (E029)."""
    value = getattr(settings, SETTING, DEFAULT)
    if _is_seconds(value):
        return []
    return [
        Problem(
            "queues.E029",
            f"{SETTING} must be a whole number of seconds from 0 to {MAX_SECONDS}, got {value!r}.",
            f"Remove it for the default ({DEFAULT}: the panel's lists refresh every {DEFAULT} s), set e.g. 10, "
            "or 0 to turn the refresh off (docs/settings.md).",
        )
    ]
