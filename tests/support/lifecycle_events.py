"""A test-only app that records the queues.worker.signals signals a worker process sends, one JSON line
each, into the file named by ``OPTIMA_TEST_EVENTS_FILE`` (installed by tests/support/lifecycle_settings.py)."""

import json
import os

from django.apps import AppConfig

SIGNALS = ("job_started", "job_succeeded", "job_failed", "job_retry_scheduled", "job_dead")


class Recorder(AppConfig):
    name = "tests.support.lifecycle_events"
    label = "lifecycle_events"

    def ready(self):
        path = os.environ.get("OPTIMA_TEST_EVENTS_FILE")
        if not path:
            return
        from queues.worker import signals as events

        for name in SIGNALS:
            getattr(events, name).connect(_recorder(path, name), weak=False)


def _recorder(path, name):
    def record(sender, queue, job, **kwargs):
        line = {"signal": name, "queue": queue, "job": job.id, "pid": os.getpid()}
        for key, value in kwargs.items():
            if key == "exc_info":
                value = value[0].__name__ if value else None
            if key == "signal":
                continue
            line[key] = value
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")

    return record
