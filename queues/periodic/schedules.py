"""Periodic jobs: declared in settings or by feature apps, run by rq-scheduler (``manage.py rqscheduler``).

Declaring::

    OPTIMA_SCHEDULES = [  # settings; a feature app's queues.py may hold SCHEDULES = [...] too
        {"id": "orders-sync-all", "queue": "orders-sync", "func": "features.orders.jobs.sync_all",
         "cron": "*/15 * * * *"},                       # cron in UTC unless "tz" names a zone
        {"id": "prices", "queue": "repricer", "func": "features.repricer.jobs.run",
         "args": [], "kwargs": {"dry_run": False}, "interval": 300},   # seconds
    ]

How it maps onto rq-scheduler 0.14 (and what it fixes of it):

- Each schedule is one *template* job ``<prefix>:job:schedule-<id>`` in rq-scheduler's sorted set
  ``<prefix>:scheduler:scheduled_jobs``, scored at its next run. ``register()`` (run by ``rqscheduler``
  when it starts) writes the declared ones and deletes templates no longer declared. Ids are explicit,
  so a restart or two schedulers never duplicate a schedule; an unchanged schedule keeps its next run
  (a restart does not run it again), a changed one is rescheduled.
- Redis holds the timing only: when a template is due, ``run.PeriodicScheduler`` runs the *declared*
  schedule of that id (a planted or stale member is removed, never read). It does not enqueue the
  template itself (rq-scheduler's
  way: one job id reused by every run, so overlapping runs overwrite each other's status and a spent
  retry counter carries into the next run). It enqueues a *fresh* job ``schedule-<id>-<unix time>`` with
  ``queues.enqueue_call``: the queue's retry policy, timeout and ``result_ttl`` (not rq-scheduler's -1,
  which keeps every run forever). The run's id derives from the tick, so two schedulers racing on one
  tick enqueue it once.
- Cron expressions are evaluated in UTC (rq-scheduler uses the server's local time), or at the wall-clock
  time of the schedule's ``"tz"`` (an IANA zone), once across daylight-saving changes (``zones``).
- Schedules may also be stored in the database and edited in the admin (``stored``): a row over a
  declared schedule of its id overrides it (the database wins). The running scheduler registers again
  when a row changed (``run.PeriodicScheduler.in_force``). Each schedule's last 50 finished runs are
  kept in ``keys.schedule_runs_key(id)`` (``history``).
- rq-scheduler polls every 60 s by default; ``rqscheduler`` polls every
  ``OPTIMA_QUEUES_OPTIONS['SCHEDULER_INTERVAL']`` seconds (5).
- Missed ticks (no scheduler polled while they were due) follow the schedule's ``missed`` policy
  (``plan.plan_runs``): ``"once"`` (the default) runs one run for all of them, at the first poll, then
  follows the cadence from then on; ``"skip"`` runs none of them (a tick still on time, due less than
  ``ON_TIME_SECONDS`` ago, runs) and goes on at the next tick after now; ``{"catch_up": N}`` runs the
  latest N due ticks, each as its own run.
- A schedule can be paused (``plan.set_paused``; the panel's periodic page): its id is in the set
  ``keys.schedules_paused_key()`` and the scheduler moves its due tick to the next one without
  running it. Each enqueued run's id is kept under ``keys.schedule_last_key(id)`` for the panel.

Where it lives: ``declare`` (the declarations, their system checks, ``Schedule``), ``validation`` (one
declaration's problems), ``zones`` (cron in a time zone), ``stored`` (the admin's schedules, the schedules
in force), ``plan`` (ticks, missed ticks, pauses, ``register``), ``run`` (``PeriodicScheduler``,
``run_schedule``), ``history`` (the last runs). This module keeps the names callers imported from it
before the split.
"""

from queues.periodic.declare import (  # noqa: F401  (the names callers import from here)
    DEFAULT_MISSED,
    MAX_CATCH_UP,
    MISSED_POLICIES,
    SCHEDULE_ID_RE,
    SCHEDULE_KEYS,
    TEMPLATE_PREFIX,
    Schedule,
    check_schedules,
    declarations,
    declared_schedules,
    validate_schedules,
)
from queues.periodic.plan import (  # noqa: F401
    ON_TIME_SECONDS,
    RegisterSummary,
    latest_ticks,
    paused_ids,
    plan_runs,
    register,
    scheduled_jobs_key,
    set_paused,
)


def scheduler_class():
    """``queues.periodic.run.PeriodicScheduler``, imported when asked for: the panel and the system
    check import this module and need none of the rq-scheduler classes."""
    from queues.periodic.run import PeriodicScheduler  # when asked for: see the docstring

    return PeriodicScheduler
