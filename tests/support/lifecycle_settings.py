"""Settings of worker processes in the lifecycle tests: the site's, plus a ``lifecycle`` queue with
its own policy. Tests that use it declare the same queue in-process (``LIFECYCLE_QUEUES``)."""

from optima_site.settings import *  # noqa: F401,F403
from optima_site.settings import OPTIMA_QUEUES

LIFECYCLE_QUEUES = {
    "lifecycle": {"attempts": 3, "backoff": 1, "non_retryable": ["tests.jobs.lifecycle.BadInput"], "completed_max": 10},
}
OPTIMA_QUEUES = dict(OPTIMA_QUEUES, **LIFECYCLE_QUEUES)

LIFECYCLE_SCHEDULES = [
    {"id": "tick", "queue": "lifecycle", "func": "tests.jobs.lifecycle.quick", "args": [1], "interval": 3600},
    {
        "id": "nightly",
        "queue": "lifecycle",
        "func": "tests.jobs.lifecycle.fail",
        "args": ["nightly"],
        "cron": "0 3 * * *",
    },
]
OPTIMA_SCHEDULES = LIFECYCLE_SCHEDULES

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.lifecycle_events.Recorder"]  # noqa: F405
