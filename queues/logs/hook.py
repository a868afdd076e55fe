"""The logs' side of the worker (``queues/events/hooks.py``): rq's own per-job lines made quiet when a
worker is made (``quiet.py``), and the job's one outcome line at each end (``outcome.py``)."""

from queues.events.hooks import Hook
from queues.logs import outcome, quiet

STOPPED = "stopped"  # the dead reason of a job an operator stopped (queues/failures/retry.py: STOPPED)


class LogsHook(Hook):
    name = "logs"

    def worker_init(self, worker):
        quiet.install()  # rq's per-job lines at DEBUG: the job's one line is outcome.py's

    def after_success(self, job, queue, duration, carried):
        outcome.succeeded(job, duration)

    def after_retry(self, job, queue, *, attempt, delay, reason, duration=None, exc_info=None, exc_string=""):
        if duration is None:
            return  # no attempt of this process failed (a dead worker's job): failures/retry.py logs it
        outcome.retried(
            job, duration, attempt=attempt, delay=delay, reason=reason, exc_info=exc_info, exc_string=exc_string
        )

    def after_dead(self, job, queue, *, reason, duration=0.0, exc_info=None, exc_string=""):
        if reason == STOPPED:
            outcome.canceled(job, duration)
        else:
            outcome.dead(job, duration, reason=reason, exc_info=exc_info, exc_string=exc_string)
