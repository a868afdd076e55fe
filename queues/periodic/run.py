"""What runs at each tick: ``PeriodicScheduler`` (rq-scheduler under the prefix) finds the due
templates, plans their runs (``plan.plan_runs``) and enqueues each run of the *declared* schedule as a
fresh job (``run_schedule``).
"""

import datetime as dt
import logging

from queues import rqcompat
from queues.connection.clients import get_connection
from queues.exceptions import InvalidJob
from queues.jobs import meta as jobmeta
from queues.keyspace import keys, quarantine
from queues.periodic import stored
from queues.periodic.plan import ON_TIME_SECONDS, paused_ids, plan_runs, register
from queues.periodic.scheduler import PrefixedScheduler
from queues.periodic.validation import task_of
from queues.producer import api as enqueueing

logger = logging.getLogger("queues.schedules")  # a documented logger name: kept when the module moved


def run_id(template_id, when):
    return f"{template_id}-{int(when.timestamp())}"


def run_schedule(schedule, when, connection=None):
    """Enqueue one run of the declared ``schedule`` (a ``Schedule``) due at ``when`` (aware); -> the
    run's Job or None (already enqueued by another scheduler). Raises on Redis errors."""

    job_id = run_id(schedule.template_id, when)
    meta = jobmeta.for_periodic_run(schedule.id, when)
    func = schedule.func
    task = task_of(func)
    if task is not None:  # a @task: its function, marked as the Tasks backend marks it, so get_result reads it
        func = task.func
        meta[jobmeta.TASK] = {"backend": task.backend}
    try:
        run = enqueueing.enqueue_call_as_app(
            schedule.queue,
            func,
            args=list(schedule.args),
            kwargs=dict(schedule.kwargs),
            attempts=schedule.attempts,
            timeout=schedule.timeout,
            job_id=job_id,
            meta=meta,
        )
    except InvalidJob as exc:
        if "already exists" in str(exc):
            logger.info("Periodic run %s was already enqueued (another scheduler)", job_id)
            return None
        raise
    (connection or get_connection()).set(keys.schedule_last_key(schedule.id), job_id)  # for the panel
    return run


class PeriodicScheduler(PrefixedScheduler):
    """rq-scheduler under the prefix, running declared schedules as fresh jobs (``manage.py rqscheduler``).

    Only the *timing* comes from Redis (the template's score in rq-scheduler's sorted set); what
    runs — function, arguments, queue, options — is the declared ``Schedule`` of the template's id.
    A member that is not a declared schedule's template (planted, left by an older release, or any
    job put there with rq-scheduler's own API, which this project does not use) is removed with an
    ERROR naming it: nothing of it is read, let alone run."""

    def expected_keys(self):
        """{key: type} of what a poll reads and writes (``queues.keyspace.quarantine``)."""
        return {self.scheduled_jobs_key: "zset", keys.schedules_paused_key(): "set"}

    def enqueue_jobs(self):
        """One poll inside the quarantine boundary: a key of the wrong type is renamed aside and the poll
        runs once more; what still fails is reported once and skipped, and the next poll tries again."""
        return quarantine.contain(
            self.connection,
            self.expected_keys,
            self._enqueue_due,
            who="rq-scheduler",
            what="enqueue the due periodic jobs",
            log=self.log,
        )

    def in_force(self):
        """The schedules in force at this poll. The admin's rows are read again only when ``stored.version()``
        changed (one indexed query a poll: 0.6 ms on SQLite with 100 rows), and then registered and validated
        once (10 ms for 100 rows; an invalid row's ERROR is said once a change): an edit is picked up within
        one poll. When the database cannot be read, what was read last is kept."""
        cache = self.__dict__.setdefault("_stored", {"version": None, "rows": None, "schedules": None})
        current = stored.version()
        if current is not None and current != cache["version"]:
            rows = stored.read_rows()
            if rows is not None:
                # Each change is registered here (the templates of the rows added, changed or deleted); so is
                # the first reading when there are rows (one added between the start's registration and this
                # poll): without rows, the start's registration of the declared schedules stands.
                if cache["rows"] is not None or rows:
                    summary = register(self.connection, rows=rows)
                    self.log.info("Stored schedules changed in the admin: registered again (%s)", summary)
                cache.update(version=current, rows=rows, schedules=stored.schedules_in_force(rows))
        if cache["schedules"] is None:  # the database never read: the declared schedules, as before it existed
            return stored.schedules_in_force([])
        return cache["schedules"]

    def _enqueue_due(self):
        now = dt.datetime.now(dt.UTC)
        declared = {s.template_id: s for s in self.in_force()}
        due = self.connection.zrangebyscore(self.scheduled_jobs_key, 0, now.timestamp(), withscores=True)
        paused = paused_ids(self.connection) if due else set()
        for member, score in due:
            schedule = declared.get(member.decode("utf-8", "replace") if isinstance(member, bytes) else member)
            if schedule is None:
                self.connection.zrem(self.scheduled_jobs_key, member)
                self.log.error(
                    "Removed %r from %s: not a declared schedule (OPTIMA_SCHEDULES, apps' "
                    "SCHEDULES); nothing of it was run",
                    member,
                    self.scheduled_jobs_key,
                )
                continue
            self.enqueue_periodic(
                schedule,
                dt.datetime.fromtimestamp(score, dt.UTC),
                now,
                paused=schedule.id in paused or not schedule.enabled,
            )
        return due

    def enqueue_periodic(self, schedule, when, now, paused=False):
        # a tick found by a late poll is on time
        grace = max(ON_TIME_SECONDS, 2 * int(rqcompat.periodic_interval(self)))
        ticks, following = plan_runs(schedule, when, now, paused=paused, grace=grace)
        self._say_paused(schedule.id, paused, when)
        if not paused and not ticks:
            self.log.info("Periodic %s: missed ticks since %s skipped (missed=skip)", schedule.id, when)
        for tick in ticks:
            try:
                run = run_schedule(schedule, tick, connection=self.connection)
                if run is not None:  # each tick: DEBUG (the run's outcome is the worker's INFO line)
                    self.log.debug("Periodic %s: enqueued run %s on %s", schedule.id, run.id, schedule.queue)
            except Exception:  # noqa: BLE001 — a broken schedule must not stop the others
                self.log.exception("Periodic %s: could not enqueue its run due at %s", schedule.id, tick)
        self.connection.zadd(self.scheduled_jobs_key, {schedule.template_id: following.timestamp()})

    def _say_paused(self, schedule_id, paused, when):
        """A pause and a resume are said once (INFO), not at each tick while nothing changes (DEBUG)."""
        said = self.__dict__.setdefault("_paused_said", set())
        if paused and schedule_id not in said:
            said.add(schedule_id)
            self.log.info(
                "Periodic %s is paused: its ticks are not run until it is resumed (first one due at %s)",
                schedule_id,
                when,
            )
        elif paused:
            self.log.debug("Periodic %s is paused: its tick due at %s was not run", schedule_id, when)
        elif schedule_id in said:
            said.discard(schedule_id)
            self.log.info("Periodic %s is resumed: its tick due at %s runs", schedule_id, when)
