"""Each schedule's last runs and their outcome: a Redis list per schedule (``keys.schedule_runs_key``),
newest first, trimmed to ``KEPT`` entries, shown on the periodic page.

Written where a periodic run finishes, by receivers of the worker's signals (``queues.events.signals``):
``job_succeeded`` and ``job_dead`` (a run that fails and will be retried is not finished yet). A run is a
job whose meta names its schedule (``jobs.meta.for_periodic_run``); any other job costs a dict lookup. One
pipelined LPUSH + LTRIM, in the worker after the job's own writes; a receiver never fails the job.
"""

import datetime as dt
import json

from queues.connection.clients import get_connection
from queues.events import signals as events
from queues.jobs import meta as jobmeta
from queues.keyspace import keys

KEPT = 50  # runs kept per schedule


def record(job, outcome, duration=None, now=None):
    """Push one finished run of a periodic schedule onto its list (nothing for another job)."""
    meta = getattr(job, "meta", None)  # a signal may carry no job (job=None: the metrics' own sends)
    schedule_id = meta.get(jobmeta.SCHEDULE) if isinstance(meta, dict) else None
    if not isinstance(schedule_id, str):
        return
    entry = {
        "id": job.id,
        "tick": meta.get(jobmeta.SCHEDULED_FOR),
        "outcome": outcome,
        "at": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        "attempt": jobmeta.current_attempt(job),
        "duration": round(duration, 3) if isinstance(duration, (int, float)) else None,
    }
    key = keys.schedule_runs_key(schedule_id)
    connection = job.connection or get_connection()
    with connection.pipeline(transaction=False) as pipe:
        pipe.lpush(key, json.dumps(entry))
        pipe.ltrim(key, 0, KEPT - 1)
        pipe.execute()


def runs(connection, schedule_id, limit=KEPT):
    """The last ``limit`` runs of ``schedule_id``, newest first."""
    return parse(connection.lrange(keys.schedule_runs_key(schedule_id), 0, limit - 1))


def parse(raws):
    """The entries of a run list (LRANGE's reply), an entry that is not a JSON object left out."""
    found = []
    for raw in raws:
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict):
            found.append(entry)
    return found


def on_job_succeeded(sender, job, duration=None, **kwargs):
    record(job, "succeeded", duration)


def on_job_dead(sender, job, reason=None, **kwargs):
    record(job, f"dead ({reason})" if reason else "dead")


events.job_succeeded.connect(on_job_succeeded, dispatch_uid="queues.periodic.history.succeeded")
events.job_dead.connect(on_job_dead, dispatch_uid="queues.periodic.history.dead")
