"""The panel's pages of a queue's workers, of one worker, and of rq-scheduler's jobs (django-rq's
``workers``, ``worker_details`` and ``scheduler_jobs``, same URLs and names).

Read with pipelines whatever their number, never written (rq's own reads SREM a gone worker and its
stale executions, rq-scheduler's ``get_jobs`` cancels a missing job):

- workers: the queue's worker set (SMEMBERS), then every worker's TYPE, queue-list length, hash and
  executions in one pipeline (``readers.read_workers``): 2 round trips for any number of workers;
- a worker: its hash and executions (1), the started entries of its queues (1), their owners (1), its current
  job (``jobread``, 1), after ``lookups.known``'s check of the key (1);
- rq-scheduler's jobs: ZCARD and one page of ZRANGE WITHSCORES (1), the page's jobs (``jobread.fetch_many``, 1).

A worker hash or set rq cannot read is left out and reported (``readers``); a scheduled entry whose score
is no time is left out, reported; a poison job shows "corrupt".
"""

import datetime as dt
import math

import redis
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django_rq.settings import get_queues_list, get_queues_map
from rq.utils import parse_composite_key
from rq.worker import Worker

from queues.board import readers
from queues.board.access import panel_context
from queues.board.readonly import get_queue_by_index, wrong_type
from queues.jobs import execution as execution_record
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.periodic.plan import scheduled_jobs_key

ITEMS_PER_PAGE = 100  # django-rq's DEFAULT_ITEMS_PER_PAGE
STARTED_READ = 1000  # started entries read per queue of a worker to find its current job (``current_job``)


def paginate(request, num_items, per_page=ITEMS_PER_PAGE):
    """``(page, page_range, offset)`` as django-rq's job lists: the page clamped to 1..last, the range
    elided around it (``Paginator.ELLIPSIS`` for a gap)."""
    if num_items <= 0:
        return 1, [], 0
    paginator = Paginator(range(num_items), per_page)
    try:
        number = max(1, int(request.GET.get("page", 1)))
    except (TypeError, ValueError):
        number = 1
    page = paginator.get_page(number)
    return page.number, list(paginator.get_elided_page_range(page.number)), per_page * (page.number - 1)


class WorkerRow:
    """A worker as the pages show it (rq's worker attributes, from ``readers.worker_reply``)."""

    def __init__(self, fields, executions):
        self.__dict__.update(fields)
        self.executions = executions

    def get_state(self):
        return self.state


@never_cache
def workers(request, queue_index):
    """The workers listening on the queue (its worker set), name, state, birth and PID, as django-rq's."""
    queue = get_queue_by_index(queue_index)
    keys = readers.worker_keys(queue.connection, queue)
    rows = [WorkerRow(f, e) for f, e in readers.read_workers(queue.connection, keys)]
    context = {
        **panel_context(request),
        "queue": queue,
        "queue_index": queue_index,
        "workers": [w for w in rows if queue.name in w.queue_names],
        "title": f"Workers in {queue.name}",
    }
    return render(request, "queues/workers.html", context)


def current_job(connection, worker_name, composite_keys, queue_names):
    """The job of the worker's first execution that is still its job's current one (rq's ``get_current_job``,
    without removing the stale ones: ``queues/jobs/execution.py``), read through ``jobread``; None when idle.
    Looked for among ``composite_keys`` (the worker's set of executions, written with RQ_EXECUTION_RECORDS) and
    the first ``STARTED_READ`` started entries of each of its queues (one round trip), whose owners are read in
    one more."""
    with connection.pipeline(transaction=False) as pipe:
        for name in queue_names:
            pipe.zrange(keys.started_key(name), 0, STARTED_READ - 1)
        replies = pipe.execute(raise_on_error=False)
    candidates = list(composite_keys)
    for name, reply in zip(queue_names, replies):
        if isinstance(reply, redis.ResponseError):
            entries.report(keys.started_key(name), f"cannot be read ({reply}): its entries left out")
        elif isinstance(reply, Exception):
            raise reply
        else:
            candidates += [m.decode("utf-8", "replace") for m in reply]
    composites = []
    for composite in dict.fromkeys(candidates):
        if ":" in composite:
            composites.append(composite)
        else:
            entries.report(composite, "not an execution key: left out")
    if not composites:
        return None
    for composite, owner in zip(composites, execution_record.owners(connection, composites)):
        if owner == worker_name:
            return jobread.fetch(parse_composite_key(composite)[0], connection)
    return None


@never_cache
def worker_details(request, queue_index, key):
    """One worker: name, state, birth, queues, PID, current job, job counts and working time."""
    queue = get_queue_by_index(queue_index)
    found = readers.read_workers(queue.connection, [key])
    if not found or not key.startswith(Worker.redis_worker_namespace_prefix):
        raise Http404(f"No worker with key {key!r} that can be read.")
    worker = WorkerRow(*found[0])
    context = {
        **panel_context(request),
        "queue": queue,
        "queue_index": queue_index,
        "worker": worker,
        "queue_names": ", ".join(worker.queue_names),
        "job": current_job(queue.connection, worker.name, worker.executions, worker.queue_names),
        # rq stores microseconds; django-rq's page said seconds and showed the stored number.
        "total_working_time": worker.total_working_time,
        "title": "Worker Info",
    }
    return render(request, "queues/worker.html", context)


def _schedule(meta):
    if "cron_string" in meta:
        return f"cron: '{meta['cron_string']}'"
    if "interval" in meta:
        return f"interval: {meta['interval']}" + (f" repeat: {meta['repeat']}" if "repeat" in meta else "")
    return "unknown"


def scheduled_page(connection, offset, length):
    """``(count, [(job, next run)])`` of rq-scheduler's sorted set, one page, in two round trips; the set
    of the wrong type reads as empty, an entry whose score is no time is left out (both reported)."""
    key = scheduled_jobs_key()
    with connection.pipeline(transaction=False) as pipe:
        pipe.zcard(key)
        pipe.zrange(key, offset, offset + length - 1, withscores=True)
        count, pairs = pipe.execute(raise_on_error=False)
    if isinstance(count, redis.ResponseError):
        entries.report(key, "not a sorted set (WRONGTYPE): read as empty")
        return 0, []
    for reply in (count, pairs):
        if isinstance(reply, Exception):
            raise reply
    timed = []
    for member, score in pairs:
        if not math.isfinite(score) or not 0 <= score < 2**40:
            entries.report(key, f"member {entries.text(member)!r} has the score {score}, not a time: left out")
            continue
        timed.append((member, dt.datetime.fromtimestamp(score, dt.UTC)))
    jobs = jobread.fetch_many([m for m, _ in timed], connection, check_origin=False)
    return int(count), [(job, at) for job, (_, at) in zip(jobs, timed) if job is not None]


@never_cache
def scheduler_jobs(request, scheduler_index):
    """rq-scheduler's jobs (the periodic jobs' templates: queues/periodic), as django-rq's page: id,
    schedule, next run, last ended, last status, callable."""
    queue = get_queue_by_index(scheduler_index)
    index = get_queues_map()
    num_jobs = _count(queue.connection)
    page, page_range, offset = paginate(request, num_jobs)
    found = scheduled_page(queue.connection, offset, ITEMS_PER_PAGE)[1] if num_jobs else []
    rows = []
    for job, at in found:
        corrupt = jobread.is_corrupt(job)
        rows.append(
            {
                "job": job,
                "id": job.id,
                "queue_index": index.get(job.origin, 0),
                "schedule": "unknown" if corrupt else _schedule(job.meta),
                "next_run": at,
                "ended_at": job.ended_at,
                "status": "corrupt" if corrupt else getattr(job.get_status(refresh=False), "value", "unknown"),
                "func_name": job.func_name,
            }
        )
    context = {
        **panel_context(request),
        "jobs": rows,
        "num_jobs": num_jobs,
        "page": page,
        "page_range": page_range,
        "ellipsis": Paginator.ELLIPSIS,
        "title": "Scheduler Managed Jobs",
        "queue_names": [q["name"] for q in get_queues_list()],
    }
    return render(request, "queues/scheduler.html", context)


def _count(connection):
    try:
        return connection.zcard(scheduled_jobs_key())
    except redis.ResponseError as exc:
        return wrong_type(scheduled_jobs_key(), exc, 0)
