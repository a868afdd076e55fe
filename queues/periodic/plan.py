"""When a schedule runs: its ticks (pure timing, ``plan_runs`` and the missed-tick policies), its
pause (a Redis set the scheduler and the panel share) and the templates ``register`` writes to
rq-scheduler's sorted set, which hold only the time of each schedule's next run.
"""

import datetime as dt
import logging
from dataclasses import dataclass, field

import redis
from rq.defaults import RQ_KEY_PREFIX
from rq.exceptions import NoSuchJobError
from rq.job import JobStatus
from rq.utils import as_text

from queues.catalog.lookup import OptimaJob
from queues.connection.clients import get_connection
from queues.jobs import meta as jobmeta
from queues.keyspace import entries, keys
from queues.periodic import stored, zones
from queues.periodic.declare import TEMPLATE_PREFIX

logger = logging.getLogger("queues.schedules")  # a documented logger name: kept when the module moved

ON_TIME_SECONDS = 60  # a tick due less than this long ago is not missed (plus two scheduler polls)


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

    ticks = zones.previous_ticks(schedule.cron, schedule.zone, now + dt.timedelta(seconds=1), first, limit)
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
    """The paused schedule ids; a member that is not UTF-8 (no schedule's id) is reported once and left out."""
    found = set()
    for member in connection.smembers(keys.schedules_paused_key()):
        try:
            found.add(as_text(member))
        except UnicodeDecodeError:
            entries.report(keys.schedules_paused_key(), f"member {entries.text(member)!r} is not UTF-8: left out")
    return found


def set_paused(schedule_id, paused, connection):
    """Pause (or resume) the schedule ``schedule_id`` (declared or stored); -> the Schedule. Raises KeyError
    naming the declared ids for an unknown one."""
    declared = {s.id: s for s in stored.schedules_in_force()}
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
        return (
            f"{len(self.added)} added, {len(self.updated)} updated, {len(self.kept)} unchanged, "
            f"{len(self.removed)} removed"
        )


def scheduled_jobs_key():

    return f"{RQ_KEY_PREFIX}:scheduler:scheduled_jobs"  # == queues.scheduler.PrefixedScheduler's


def register(connection=None, now=None, rows=None):
    """Make rq-scheduler's set of periodic jobs equal the schedules in force (declared, with the admin's
    stored ``rows`` over them: read here when not given). Idempotent. When the stored rows cannot be read,
    no template is removed (a database outage must not drop the admin's schedules)."""

    connection = connection or get_connection()
    now = now or dt.datetime.now(dt.UTC)
    key = scheduled_jobs_key()
    summary = RegisterSummary()
    if rows is None:
        rows = stored.read_rows()
    complete = rows is not None
    desired = {s.template_id: s for s in stored.schedules_in_force(rows or [])}
    for template_id, schedule in desired.items():
        try:
            current = OptimaJob.fetch(template_id, connection=connection)
            current_digest = current.meta.get(jobmeta.TEMPLATE_DIGEST)
        except NoSuchJobError:
            current_digest = None
        except redis.RedisError:
            raise
        except Exception as exc:  # noqa: BLE001 — planted or damaged: written again from its declaration
            entries.report(
                OptimaJob.key_for(template_id),
                f"not a template rq can read ({type(exc).__name__}): written again from its declaration",
            )
            current_digest = None
        if current_digest == schedule.digest() and connection.zscore(key, template_id) is not None:
            summary.kept.append(schedule.id)
            continue
        template = OptimaJob.create(
            schedule.func,
            args=list(schedule.args),
            kwargs=dict(schedule.kwargs),
            connection=connection,
            id=template_id,
            status=JobStatus.SCHEDULED,
            description=f"periodic {schedule.id}: {schedule.cron or f'every {schedule.interval}s'}",
            meta=jobmeta.for_template(schedule),
        )
        template.origin = schedule.queue
        with connection.pipeline() as pipe:
            template.save(pipeline=pipe)
            pipe.zadd(key, {template_id: schedule.next_run(now).timestamp()})
            pipe.execute()
        (summary.updated if current_digest else summary.added).append(schedule.id)
    for raw in connection.zrange(key, 0, -1):
        member = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw  # bytes: no template
        if member.startswith(TEMPLATE_PREFIX) and member not in desired and complete:
            with connection.pipeline() as pipe:
                pipe.zrem(key, raw)
                pipe.delete(OptimaJob.key_for(member))
                pipe.delete(keys.schedule_last_key(member[len(TEMPLATE_PREFIX) :]))
                pipe.delete(keys.schedule_runs_key(member[len(TEMPLATE_PREFIX) :]))
                pipe.srem(keys.schedules_paused_key(), member[len(TEMPLATE_PREFIX) :])
                pipe.execute()
            summary.removed.append(member[len(TEMPLATE_PREFIX) :])
    logger.info("Periodic jobs registered: %s", summary)
    return summary
