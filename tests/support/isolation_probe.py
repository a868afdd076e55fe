"""Run by tests/queues/test_testing.py in a child ``manage.py test`` / pytest-django process (never collected
here: not a ``test_*.py`` file): enqueues a job and writes the prefix it ran under and its keys to
``$PROBE_OUT``."""

import json
import os

from django.conf import settings
from django.test import SimpleTestCase

import queues
from queues.connection.clients import get_connection
from tests.jobs import sample


class IsolationProbe(SimpleTestCase):
    def test_probe(self):
        job = queues.enqueue("default", sample.add, 1, 2)
        keys = sorted(k.decode() for k in get_connection().scan_iter(match=f"{settings.QUEUE_PREFIX}:*"))
        with open(os.environ["PROBE_OUT"], "w") as f:
            json.dump({"prefix": settings.QUEUE_PREFIX, "job": job.id, "keys": keys}, f)
