"""The metrics' side of the worker (``queues/events/hooks.py``): the worker imports none of this.

In a worker the recorder's receivers only add to the process's ``tally`` (``recorder.py``); this hook
lets the worker write it in the pipelines it sends anyway (its heartbeat, a fork-free success's one
call), hand a work horse's tally to its worker, and take the panel's per-minute history sample on a
due heartbeat (``history.py``: once per wall-clock minute per worker, a Redis lock lets one worker win), and
sum up the repeated reports whose minute ended (``keyspace/repeats.py``).
"""

import time

from queues.events.hooks import Hook
from queues.keyspace import repeats
from queues.metrics import history
from queues.metrics.recorder import count_success, tally


class MetricsHook(Hook):
    name = "metrics"

    def __init__(self):
        self._history_minute = None

    def worker_start(self, worker):
        tally.deferred = True  # the events ride on the worker's pipelines from now on

    def worker_stop(self, worker):
        tally.deferred = False  # the process is left as it was found

    def pending(self):
        return tally.pending()

    def write_into(self, pipe):
        return tally.flush_into(pipe)

    def restore(self, token):
        tally.merge(token)

    def hand_over(self):
        return tally.drain() if tally.pending() else None

    def take_over(self, data):
        tally.merge(data)

    def heartbeat(self, connection):
        repeats.flush_due(connection)  # a flood's count is summed up when its minute ends, not at its next entry
        minute = int(time.time() // history.MINUTE)
        if self._history_minute != minute:
            self._history_minute = minute
            history.sample_if_due(connection)

    def before_success_write(self, job, queue, duration):
        count_success(queue, duration, job)
