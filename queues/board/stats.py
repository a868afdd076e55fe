"""The dashboard's per-queue statistics: django-rq's ``get_statistics``, poison-proof.

django-rq's version decodes the head job id as UTF-8, fetches it with rq (which raises on a poison
job) and formats its ``enqueued_at`` (None for some): one planted entry made the dashboard, its
``stats.json`` and the panel's ``metrics`` answer 500, and a queue key of the wrong type a 503 for
all of them. Here the same dictionary is built from the read-only queue and registries
(``readonly``: a key of the wrong type counts 0), the head job is read through ``jobread`` (a
corrupt one shows "corrupt"), and each queue lists its ``problems`` (a key that is not of the type
rq expects), shown on the dashboard. Nothing is written.
"""

from django.core.exceptions import ImproperlyConfigured
from django_rq.queues import get_scheduler
from django_rq.settings import get_queues_list
from django_rq.templatetags.django_rq import to_localtime
from django_rq.utils import get_displayable_connection_kwargs

from queues.board import readonly
from queues.board.readers import JSONWorker, read_only_scheduler
from queues.jobs import read as jobread

EXPECTED_TYPES = {
    "queue": b"list",
    "high band": b"list",
    "low band": b"list",
    "started": b"zset",
    "finished": b"zset",
    "failed": b"zset",
    "deferred": b"zset",
    "scheduled": b"zset",
    "canceled": b"zset",
}


def _keys(queue):
    high, _, low = queue.band_keys  # the priority bands of the queue (keys.band_keys)
    return {
        "queue": queue.key,
        "high band": high,
        "low band": low,
        "started": queue.started_job_registry.key,
        "finished": queue.finished_job_registry.key,
        "failed": queue.failed_job_registry.key,
        "deferred": queue.deferred_job_registry.key,
        "scheduled": queue.scheduled_job_registry.key,
        "canceled": queue.canceled_job_registry.key,
    }


def problems(queue):
    """["<key> is a hash, not a list", ...] for the queue's keys of the wrong type (one round trip)."""
    keys = _keys(queue)
    with queue.connection.pipeline(transaction=False) as pipe:
        for key in keys.values():
            pipe.type(key)
        types = pipe.execute()
    return [
        f"{key} is a {jobread.text(kind)}, not a {EXPECTED_TYPES[name].decode()}"
        for (name, key), kind in zip(keys.items(), types)
        if kind not in (b"none", EXPECTED_TYPES[name])
    ]


def oldest_timestamp(queue):
    """When the job at the head of the queue was enqueued, "-" for none, "corrupt" for a poison one."""
    ids = queue.get_job_ids(0, 1)
    job = queue.fetch_job(ids[0]) if ids else None
    if job is None:
        return "-"
    if jobread.is_corrupt(job):
        return "corrupt"
    return to_localtime(job.enqueued_at).strftime("%Y-%m-%d, %H:%M:%S") if job.enqueued_at else "-"


def queue_statistics(index):
    queue = readonly.get_queue_by_index(index)
    return {
        "name": queue.name,
        "jobs": queue.count,
        "oldest_job_timestamp": oldest_timestamp(queue),
        "index": index,
        "connection_kwargs": get_displayable_connection_kwargs(queue),
        # rq's scheduler (a worker's child) holding the queue's lock: django-rq's get_scheduler_pid answers
        # False whenever rq-scheduler is installed, so its column was always empty.
        "scheduler_pid": queue.scheduler_pid,
        "workers": JSONWorker.count(queue=queue),
        "finished_jobs": len(queue.finished_job_registry),
        "started_jobs": len(queue.started_job_registry),
        "deferred_jobs": len(queue.deferred_job_registry),
        "failed_jobs": len(queue.failed_job_registry),
        "scheduled_jobs": len(queue.scheduled_job_registry),
        "canceled_jobs": len(queue.canceled_job_registry),
        "problems": problems(queue),
    }


def statistics(run_maintenance_tasks=False):
    """django-rq's ``get_statistics`` (same keys, plus ``problems``); never runs maintenance."""
    return {"queues": [queue_statistics(index) for index, _ in enumerate(get_queues_list())]}


def scheduler_statistics():
    """django-rq's ``get_scheduler_statistics`` (same keys) through ``readers.read_only_scheduler``:
    rq-scheduler's set of the wrong type counts 0 instead of raising."""

    schedulers = {}
    for index, config in enumerate(get_queues_list()):
        queue = readonly.get_queue_by_index(index)
        kwargs = get_displayable_connection_kwargs(queue)
        where = f"{kwargs.get('host', 'NOHOST')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"
        if where not in schedulers:
            try:
                scheduler = read_only_scheduler(get_scheduler(config["name"]))
            except ImproperlyConfigured:  # as django-rq's: rq-scheduler not installed
                continue
            schedulers[where] = {"count": scheduler.count(), "index": index}
    return {"schedulers": schedulers}
