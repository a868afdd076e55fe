"""rq-scheduler under the environment prefix.

rq-scheduler 0.14 hard-codes its four keys as ``rq:...`` class attributes; rq 3.0's
``RQ_KEY_PREFIX`` does not reach them. This subclass rebuilds them from the prefix rq was
imported with (== QUEUE_PREFIX, enforced by check queues.E006), and makes the jobs it creates
JSON jobs of the queue they are scheduled for.
"""

from django_rq.queues import DjangoScheduler
from rq.defaults import RQ_KEY_PREFIX

from queues.catalog.lookup import OptimaJob, OptimaQueue


class PrefixedScheduler(DjangoScheduler):
    redis_scheduler_namespace_prefix = f"{RQ_KEY_PREFIX}:scheduler_instance:"
    scheduler_key = f"{RQ_KEY_PREFIX}:scheduler"
    scheduler_lock_key = f"{RQ_KEY_PREFIX}:scheduler_lock"
    scheduled_jobs_key = f"{RQ_KEY_PREFIX}:scheduler:scheduled_jobs"
    queue_class = OptimaQueue
    job_class = OptimaJob

    def __init__(self, *args, **kwargs):
        kwargs["job_class"] = OptimaJob
        kwargs["queue_class"] = OptimaQueue
        super().__init__(*args, **kwargs)

    def register_death(self):
        """rq-scheduler registers its death in its SIGTERM handler and again in ``run``'s ``finally``: once
        per name is enough (a restart after an outage runs under a new name: ``supervision.run_rq_scheduler``)."""
        if self.__dict__.get("_death_registered") == self.name:
            return
        super().register_death()
        self._death_registered = self.name
