"""Periodic jobs: schedules declared in settings and apps, run by rq-scheduler under the prefix.

``schedules`` tells the whole story (and keeps the names callers import); ``declare`` gathers the
declarations, checks them (each through ``validation``) and makes them ``Schedule`` objects; ``zones``
evaluates a cron in a time zone; ``stored`` reads the schedules edited in the admin over the declared
ones; ``history`` keeps each schedule's last runs; ``plan`` computes the ticks, keeps pauses and writes
the templates to rq-scheduler's keys; ``run`` is the scheduler that enqueues each due run;
``scheduler`` is rq-scheduler under the prefix and ``supervision`` keeps both schedulers alive
through outages.
"""

# The run history's receivers (the worker's signals) are connected when the app is ready, which imports this
# package (apps.py imports ``declare``): ``history``'s docstring says what they write.
from queues.periodic import history  # noqa: E402, F401
