"""Periodic jobs: declared in settings or by feature apps, run by rq-scheduler (``manage.py rqscheduler``).

Declaring::

    OPTIMA_SCHEDULES = [  # settings; a feature app's queues.py may hold SCHEDULES = [...] too
        {"id": "orders-sync-all", "queue": "orders-sync", "func": "features.orders.jobs.sync_all",
         "cron": "*/15 * * * *"},                       # cron in UTC, always
        {"id": "prices", "queue": "repricer", "func": "features.repricer.jobs.run",
         "args": [], "kwargs": {"dry_run": False}, "interval": 300},   # seconds
    ]

How it maps onto rq-scheduler 0.14 (and what it fixes of it):

- Each schedule is one *template* job ``<prefix>:job:schedule-<id>`` in rq-scheduler's sorted set
  ``<prefix>:scheduler:scheduled_jobs``, scored at its next run. ``register()`` (run by ``rqscheduler``
  when it starts) writes the declared ones and deletes templates no longer declared. Ids are explicit,
  so a restart or two schedulers never duplicate a schedule; an unchanged schedule keeps its next run
  (a restart does not run it again), a changed one is rescheduled.
- Redis holds the timing only: when a template is due, ``PeriodicScheduler`` runs the *declared*
  schedule of that id (a planted or stale member is removed, never read). It does not enqueue the
  template itself (rq-scheduler's
  way: one job id reused by every run, so overlapping runs overwrite each other's status and a spent
  retry counter carries into the next run). It enqueues a *fresh* job ``schedule-<id>-<unix time>`` with
  ``queues.enqueue_call``: the queue's retry policy, timeout and ``result_ttl`` (not rq-scheduler's -1,
  which keeps every run forever). The run's id derives from the tick, so two schedulers racing on one
  tick enqueue it once.
- Cron expressions are evaluated in UTC (rq-scheduler uses the server's local time).
- rq-scheduler polls every 60 s by default; ``rqscheduler`` polls every
  ``OPTIMA_QUEUES_OPTIONS['SCHEDULER_INTERVAL']`` seconds (5).
- Missed ticks (no scheduler polled while they were due) follow the schedule's ``missed`` policy
  (``plan_runs``): ``"once"`` (the default) runs one run for all of them, at the first poll, then
  follows the cadence from then on; ``"skip"`` runs none of them (a tick still on time, due less than
  ``ON_TIME_SECONDS`` ago, runs) and goes on at the next tick after now; ``{"catch_up": N}`` runs the
  latest N due ticks, each as its own run.
- A schedule can be paused (``pause``; the panel's periodic page): its id is in the set
  ``keys.schedules_paused_key()`` and the scheduler moves its due tick to the next one without
  running it. Each enqueued run's id is kept under ``keys.schedule_last_key(id)`` for the panel.
"""
import datetime as dt
import hashlib
import json
import logging
import re
from dataclasses import dataclass, field

from django.conf import settings
from django.core import checks as django_checks
from rq.utils import as_text

from queues import conf, keys

from queues.catalog import jobs as catalog

from queues.jobs import meta as jobmeta
from queues.catalog import queues as queue_declarations  # aliased: declarations() below lists the schedules'

logger = logging.getLogger("queues.schedules")  # a documented logger name: kept when the module moved

TEMPLATE_PREFIX = "schedule-"
SCHEDULE_ID_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,99}")
SCHEDULE_KEYS = ("id", "queue", "func", "args", "kwargs", "cron", "interval", "attempts", "timeout", "missed")
MISSED_POLICIES = ("once", "skip")  # or {"catch_up": N}
DEFAULT_MISSED = "once"  # what the scheduler did before the policy existed
MAX_CATCH_UP = 1000  # runs one poll enqueues for one schedule, at most
ON_TIME_SECONDS = 60  # a tick due less than this long ago is not missed (plus two scheduler polls)


@dataclass(frozen=True)
class Schedule:
    id: str
    queue: str
    func: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    cron: str | None = None  # 5-field cron expression, UTC
    interval: int | None = None  # seconds
    attempts: int | None = None  # None: the queue's
    timeout: int | None = None  # None: the queue's
    source: str = "settings"
    # Not in spec()/digest(): the policy changes no timing, so changing it does not reschedule.
    missed: object = DEFAULT_MISSED  # "once", "skip" or {"catch_up": N}

    @property
    def template_id(self):
        return f"{TEMPLATE_PREFIX}{self.id}"

    def spec(self):
        """The JSON-able definition (what a change of the declaration changes)."""
        return {"id": self.id, "queue": self.queue, "func": self.func, "args": list(self.args),
                "kwargs": dict(self.kwargs), "cron": self.cron, "interval": self.interval,
                "attempts": self.attempts, "timeout": self.timeout}

    def digest(self):
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()[:16]

    def next_run(self, after):
        """The first run strictly after ``after`` (aware datetime), as an aware UTC datetime."""
        after = after.astimezone(dt.timezone.utc)
        if self.interval:
            return after + dt.timedelta(seconds=self.interval)
        import crontab

        return crontab.CronTab(self.cron).next(now=after, return_datetime=True, default_utc=True).astimezone(
            dt.timezone.utc)


def declarations():
    """(where, list) of every schedule declaration: feature apps' ``SCHEDULES``, then settings."""
    found = []
    for app_config, module in queue_declarations.app_modules():
        if hasattr(module, "SCHEDULES"):
            found.append((f"{app_config.label}.queues.SCHEDULES", module.SCHEDULES))
    found.append(("OPTIMA_SCHEDULES", getattr(settings, "OPTIMA_SCHEDULES", [])))
    return found


def declared_schedules():
    """Every declared Schedule, by id; settings override an app's schedule of the same id."""
    problems = [p for p in validate_schedules() if p.level == "error"]
    if problems:
        from django.core.exceptions import ImproperlyConfigured

        first = problems[0]
        raise ImproperlyConfigured(f"{first.msg} {first.hint} ({first.id}; run manage.py check for all)")
    result = {}
    for where, entries in declarations():
        for entry in entries:
            result[entry["id"]] = Schedule(
                id=entry["id"], queue=entry["queue"], func=entry["func"], args=tuple(entry.get("args") or ()),
                kwargs=dict(entry.get("kwargs") or {}), cron=entry.get("cron"), interval=entry.get("interval"),
                attempts=entry.get("attempts"), timeout=entry.get("timeout"), source=where,
                missed=entry.get("missed", DEFAULT_MISSED),
            )
    return [result[k] for k in sorted(result)]


def validate_schedules(queue_names=None):
    """Problems of the schedule declarations (check ids queues.E030-E037, docs/checks.md)."""
    from django.utils.module_loading import import_string

    from queues.producer.api import _check_args
    from queues.exceptions import InvalidJob

    if queue_names is None:
        queue_names = queue_declarations.names()
    problems = []
    for where, entries in declarations():
        if not isinstance(entries, (list, tuple)):
            problems.append(conf.Problem("queues.E030", f"{where} must be a list of schedule dicts, got {entries!r}.",
                                        "E.g. [{'id': 'nightly', 'queue': 'default', 'func': 'app.jobs.f', "
                                        "'cron': '0 3 * * *'}]."))
            continue
        seen = set()
        for i, entry in enumerate(entries):
            label = f"{where}[{i}]"
            if not isinstance(entry, dict):
                problems.append(conf.Problem("queues.E030", f"{label} must be a dict, got {entry!r}.",
                                             f"Keys: {', '.join(SCHEDULE_KEYS)}."))
                continue
            for key in entry:
                if key not in SCHEDULE_KEYS:
                    problems.append(conf.Problem(
                        "queues.E031", f"{label} has an unknown key {key!r}.",
                        f"{conf._did_you_mean(key, SCHEDULE_KEYS)}Valid keys: {', '.join(SCHEDULE_KEYS)}."))
            sid = entry.get("id")
            if not isinstance(sid, str) or not SCHEDULE_ID_RE.fullmatch(sid):
                problems.append(conf.Problem(
                    "queues.E032", f"{label}['id'] must match [a-z0-9][a-z0-9_.-]{{0,99}}, got {sid!r}.",
                    "Give every schedule an explicit, stable id (it names the schedule in Redis)."))
            elif sid in seen:
                problems.append(conf.Problem("queues.E032", f"{label}['id'] {sid!r} is declared twice in {where}.",
                                             "Schedule ids must be unique."))
            else:
                seen.add(sid)
                label = f"{where}[{sid!r}]"
            queue = entry.get("queue")
            if queue not in queue_names:
                problems.append(conf.Problem(
                    "queues.E033", f"{label}['queue'] is {queue!r}, which is not a declared queue.",
                    f"{conf._did_you_mean(str(queue), queue_names)}Declared queues: "
                    f"{', '.join(sorted(queue_names)) or '(none)'}."))
            func = entry.get("func")
            try:
                ok = isinstance(func, str) and callable(import_string(func))
            except ImportError:
                ok = False
            if not ok:
                problems.append(conf.Problem("queues.E034", f"{label}['func'] is {func!r}, which cannot be imported.",
                                             "Give the dotted path of a module-level function, e.g. "
                                             "'features.orders.jobs.sync_all'."))
            elif not catalog.is_declared(func):
                problems.append(conf.Problem("queues.E036", f"{label}['func'] {catalog.why_not(func)}",
                                             "A periodic job runs only when its function is a declared job."))
            problems.extend(_validate_timing(label, entry))
            problems.extend(_validate_missed(label, entry))
            try:
                _check_args(list(entry.get("args") or ()) if isinstance(entry.get("args", ()), (list, tuple))
                            else entry.get("args"), entry.get("kwargs") or {})
            except InvalidJob as exc:
                problems.append(conf.Problem("queues.E035", f"{label}: {exc}", "Schedule arguments are JSON."))
            options = {k: entry[k] for k in ("attempts", "timeout") if entry.get(k) is not None}
            problems.extend(conf.validate_job_options(label, options))
    return problems


def _validate_timing(label, entry):
    cron, interval = entry.get("cron"), entry.get("interval")
    if (cron is None) == (interval is None):
        return [conf.Problem("queues.E035", f"{label} needs exactly one of 'cron' and 'interval', got "
                                            f"cron={cron!r}, interval={interval!r}.",
                             "'cron': '*/15 * * * *' (UTC) or 'interval': 900 (seconds).")]
    if interval is not None:
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            return [conf.Problem("queues.E035", f"{label}['interval'] must be a whole number of seconds >= 1, "
                                                f"got {interval!r}.", "E.g. 'interval': 300.")]
        return []
    try:
        import crontab

        ok = isinstance(cron, str) and len(cron.split()) == 5 and crontab.CronTab(cron) is not None
    except ValueError:
        ok = False
    if not ok:
        return [conf.Problem("queues.E035", f"{label}['cron'] is {cron!r}, not a 5-field cron expression.",
                             "minute hour day-of-month month day-of-week, in UTC: e.g. '0 3 * * *'.")]
    return []


def _validate_missed(label, entry):
    missed = entry.get("missed", DEFAULT_MISSED)
    if missed in MISSED_POLICIES and isinstance(missed, str):
        return []
    if isinstance(missed, dict) and set(missed) == {"catch_up"}:
        n = missed["catch_up"]
        if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_CATCH_UP:
            return []
    return [conf.Problem("queues.E037", f"{label}['missed'] must be 'once', 'skip' or {{'catch_up': N}} with "
                                        f"N a whole number from 1 to {MAX_CATCH_UP}, got {missed!r}.",
                         "'once' (default): one run for all missed ticks; 'skip': none, go on at the next "
                         "tick; {'catch_up': 5}: the latest 5 due ticks, each its own run.")]


# --- missed ticks and pauses (pure timing, then the Redis state the scheduler and panel share) ------


def _tick_after(schedule, first, now):
    """The first tick of ``schedule`` strictly after ``now``, on the cadence that ``first`` anchors."""
    if schedule.interval:
        steps = int((now - first).total_seconds() // schedule.interval) + 1
        return first + dt.timedelta(seconds=schedule.interval * max(steps, 1))
    return schedule.next_run(now)


def latest_ticks(schedule, first, now, limit):
    """The latest ``limit`` ticks from ``first`` (the due score) up to ``now``, oldest first."""
    if now < first:
        return []
    if schedule.interval:
        last = int((now - first).total_seconds() // schedule.interval)
        return [first + dt.timedelta(seconds=schedule.interval * k) for k in range(max(0, last - limit + 1), last + 1)]
    import crontab

    cron, ticks, cursor = crontab.CronTab(schedule.cron), [], now + dt.timedelta(seconds=1)
    while len(ticks) < limit:
        cursor = cron.previous(now=cursor, return_datetime=True, default_utc=True).astimezone(dt.timezone.utc)
        if cursor < first:
            break
        if cursor <= now:
            ticks.append(cursor)
    return ticks[::-1] or [first]


def plan_runs(schedule, first, now, paused=False, grace=ON_TIME_SECONDS):
    """(ticks to run, next tick) when ``schedule``'s tick ``first`` (aware) is due at ``now``.

    Pure. A tick is *missed* when a later one is due too, or it is more than ``grace`` seconds late.
    ``once``: one run, for ``first`` (its run id), then the next tick after it or now. ``skip``: only
    the latest due tick, if on time. ``{"catch_up": N}``: the latest N due ticks. A paused schedule
    runs nothing. Except for ``once``, the next tick is the cadence's first after ``now``."""
    if schedule.missed == "once" and not paused:
        return [first], schedule.next_run(max(now, first))
    following = _tick_after(schedule, first, now)
    if paused:
        return [], following
    if schedule.missed == "skip":
        ticks = latest_ticks(schedule, first, now, 1)
        return [t for t in ticks if (now - t).total_seconds() <= grace], following
    return latest_ticks(schedule, first, now, int(schedule.missed["catch_up"])), following


def paused_ids(connection):
    return {as_text(m) for m in connection.smembers(keys.schedules_paused_key())}


def set_paused(schedule_id, paused, connection):
    """Pause (or resume) the declared schedule ``schedule_id``; -> the Schedule. Raises KeyError
    naming the declared ids for an unknown one."""
    declared = {s.id: s for s in declared_schedules()}
    if schedule_id not in declared:
        raise KeyError(f"No periodic schedule {schedule_id!r}; declared: {', '.join(declared) or '(none)'}.")
    (connection.sadd if paused else connection.srem)(keys.schedules_paused_key(), schedule_id)
    return declared[schedule_id]


# --- registration ------------------------------------------------------------------------------------


@dataclass
class RegisterSummary:
    added: list = field(default_factory=list)
    updated: list = field(default_factory=list)
    kept: list = field(default_factory=list)
    removed: list = field(default_factory=list)

    def __str__(self):
        return (f"{len(self.added)} added, {len(self.updated)} updated, {len(self.kept)} unchanged, "
                f"{len(self.removed)} removed")


def scheduled_jobs_key():
    from rq.defaults import RQ_KEY_PREFIX

    return f"{RQ_KEY_PREFIX}:scheduler:scheduled_jobs"  # == queues.scheduler.PrefixedScheduler's


def register(connection=None, now=None):
    """Make rq-scheduler's set of periodic jobs equal the declared schedules. Idempotent."""
    from rq.exceptions import NoSuchJobError
    from rq.job import JobStatus

    from queues.connection.clients import get_connection
    from queues.catalog.lookup import OptimaJob

    connection = connection or get_connection()
    now = now or dt.datetime.now(dt.timezone.utc)
    key = scheduled_jobs_key()
    summary = RegisterSummary()
    desired = {s.template_id: s for s in declared_schedules()}
    for template_id, schedule in desired.items():
        try:
            current = OptimaJob.fetch(template_id, connection=connection)
            current_digest = current.meta.get(jobmeta.TEMPLATE_DIGEST)
        except NoSuchJobError:
            current_digest = None
        if current_digest == schedule.digest() and connection.zscore(key, template_id) is not None:
            summary.kept.append(schedule.id)
            continue
        template = OptimaJob.create(
            schedule.func, args=list(schedule.args), kwargs=dict(schedule.kwargs), connection=connection,
            id=template_id, status=JobStatus.SCHEDULED, description=f"periodic {schedule.id}: {schedule.cron or f'every {schedule.interval}s'}",
            meta=jobmeta.for_template(schedule),
        )
        template.origin = schedule.queue
        with connection.pipeline() as pipe:
            template.save(pipeline=pipe)
            pipe.zadd(key, {template_id: schedule.next_run(now).timestamp()})
            pipe.execute()
        (summary.updated if current_digest else summary.added).append(schedule.id)
    for raw in connection.zrange(key, 0, -1):
        member = as_text(raw)
        if member.startswith(TEMPLATE_PREFIX) and member not in desired:
            with connection.pipeline() as pipe:
                pipe.zrem(key, member)
                pipe.delete(OptimaJob.key_for(member))
                pipe.delete(keys.schedule_last_key(member[len(TEMPLATE_PREFIX):]))
                pipe.srem(keys.schedules_paused_key(), member[len(TEMPLATE_PREFIX):])
                pipe.execute()
            summary.removed.append(member[len(TEMPLATE_PREFIX):])
    logger.info("Periodic jobs registered: %s", summary)
    return summary


def run_id(template_id, when):
    return f"{template_id}-{int(when.timestamp())}"


def run_schedule(schedule, when, connection=None):
    """Enqueue one run of the declared ``schedule`` (a ``Schedule``) due at ``when`` (aware); -> the
    run's Job or None (already enqueued by another scheduler). Raises on Redis errors."""
    from queues.producer import api as enqueueing
    from queues.connection.clients import get_connection
    from queues.exceptions import InvalidJob

    job_id = run_id(schedule.template_id, when)
    try:
        run = enqueueing.enqueue_call(
            schedule.queue, schedule.func, args=list(schedule.args), kwargs=dict(schedule.kwargs),
            attempts=schedule.attempts, timeout=schedule.timeout, job_id=job_id,
            meta=jobmeta.for_periodic_run(schedule.id, when),
        )
    except InvalidJob as exc:
        if "already exists" in str(exc):
            logger.info("Periodic run %s was already enqueued (another scheduler)", job_id)
            return None
        raise
    (connection or get_connection()).set(keys.schedule_last_key(schedule.id), job_id)  # for the panel
    return run


_scheduler_class = None


def scheduler_class():
    """``PeriodicScheduler``: rq-scheduler under the prefix, running declared schedules as fresh jobs.
    Built on first use so that importing this module (for its system check) does not import django-rq.

    Only the *timing* comes from Redis (the template's score in rq-scheduler's sorted set); what
    runs — function, arguments, queue, options — is the declared ``Schedule`` of the template's id.
    A member that is not a declared schedule's template (planted, left by an older release, or any
    job put there with rq-scheduler's own API, which this project does not use) is removed with an
    ERROR naming it: nothing of it is read, let alone run."""
    global _scheduler_class
    if _scheduler_class is None:
        from queues.periodic.scheduler import PrefixedScheduler

        class PeriodicScheduler(PrefixedScheduler):
            def enqueue_jobs(self):
                now = dt.datetime.now(dt.timezone.utc)
                declared = {s.template_id: s for s in declared_schedules()}
                due = self.connection.zrangebyscore(self.scheduled_jobs_key, 0, now.timestamp(), withscores=True)
                paused = paused_ids(self.connection) if due else set()
                for member, score in due:
                    schedule = declared.get(member.decode("utf-8", "replace") if isinstance(member, bytes) else member)
                    if schedule is None:
                        self.connection.zrem(self.scheduled_jobs_key, member)
                        self.log.error("Removed %r from %s: not a declared schedule (OPTIMA_SCHEDULES, apps' "
                                       "SCHEDULES); nothing of it was run", member, self.scheduled_jobs_key)
                        continue
                    self.enqueue_periodic(schedule, dt.datetime.fromtimestamp(score, dt.timezone.utc), now,
                                          paused=schedule.id in paused)
                return due

            def enqueue_periodic(self, schedule, when, now, paused=False):
                grace = max(ON_TIME_SECONDS, 2 * int(self._interval))  # a tick found by a late poll is on time
                ticks, following = plan_runs(schedule, when, now, paused=paused, grace=grace)
                if paused:
                    self.log.info("Periodic %s is paused: its tick due at %s was not run", schedule.id, when)
                elif not ticks:
                    self.log.info("Periodic %s: missed ticks since %s skipped (missed=skip)", schedule.id, when)
                for tick in ticks:
                    try:
                        run = run_schedule(schedule, tick, connection=self.connection)
                        if run is not None:
                            self.log.info("Periodic %s: enqueued run %s on %s", schedule.id, run.id, schedule.queue)
                    except Exception:  # noqa: BLE001 — a broken schedule must not stop the others
                        self.log.exception("Periodic %s: could not enqueue its run due at %s", schedule.id, tick)
                self.connection.zadd(self.scheduled_jobs_key, {schedule.template_id: following.timestamp()})

        _scheduler_class = PeriodicScheduler
    return _scheduler_class


@django_checks.register(django_checks.Tags.compatibility)
def check_schedules(app_configs=None, **kwargs):
    """System check of the schedule declarations (queues.E030-E037)."""
    result = []
    for problem in validate_schedules():
        cls = django_checks.Error if problem.level == "error" else django_checks.Warning
        result.append(cls(problem.msg, hint=problem.hint or None, id=problem.id))
    return result
