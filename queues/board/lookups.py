"""Unknown ids in a panel URL answer 404, never 500.

django-rq's views index ``settings.RQ_QUEUES`` with the URL's ``queue_index`` /
``scheduler_index`` (an ``IndexError`` on a bad one), fetch ``job_id`` without catching
``NoSuchJobError`` (delete, requeue, enqueue) and ``assert`` that a worker ``key`` exists. ``known``
wraps each of them (``urls.py``) and checks every such URL argument first, in one place, by the
argument's name — so a view added to django-rq's URLconf is covered as long as it uses these names:

| URL argument | 404 when |
| --- | --- |
| ``queue_index``, ``scheduler_index`` | not an index of the declared queues (sorted by name) |
| ``job_id`` | no such job in Redis (a corrupt one is handed to ``corrupt.respond``: shown, deletable) |
| ``key`` | not a worker key of this prefix, no such worker, or one rq cannot read (reported) |

A ``NoSuchJobError`` raised later by the view (the job deleted meanwhile) is a 404 too. A
``WRONGTYPE`` that rq's own code raises for a planted key none of the panel's readers met (they
read such keys as empty: ``readonly``, ``readers``, ``jobread``) answers ``bad_entry``'s page (200,
naming the queue's keys of the wrong type), not the guard's 503 "Redis did not answer in time".
"""

import functools

import redis
from django.http import Http404
from django.shortcuts import render
from django_rq.settings import get_queues_list
from rq.exceptions import NoSuchJobError
from rq.worker import Worker

from queues.board import bounded
from queues.board.access import panel_context
from queues.board.corrupt import respond
from queues.board.readers import JSONWorker
from queues.board.readonly import get_queue_by_index
from queues.board.stats import problems
from queues.connection import servers
from queues.jobs import read as jobread
from queues.keyspace import entries


def queue_name_at(index):
    """The declared queue at django-rq's ``index``, or Http404 naming the valid ones."""
    names = [q["name"] for q in get_queues_list()]
    if not 0 <= int(index) < len(names):
        valid = ", ".join(f"{i} ({n})" for i, n in enumerate(names))
        raise Http404(f"No queue #{index}. The declared queues are {valid}.")
    return names[int(index)]


def check_job(job_id):
    """The job (or ``CorruptJob``) ``job_id``, or Http404."""
    job = jobread.fetch(job_id, bounded.connection())
    if job is None:
        raise Http404(f"No job {job_id!r} in Redis (deleted, expired, or never there).")
    return job


def check_worker(key):
    """Http404 unless ``key`` is a worker the panel can read (``readers.JSONWorker``: a hash of the
    wrong type or that rq cannot read is reported and answers 404)."""

    prefix = Worker.redis_worker_namespace_prefix
    if not key.startswith(prefix) or JSONWorker.find_by_key(key, bounded.connection()) is None:
        raise Http404(f"No worker with key {key!r} that can be read (worker keys start with {prefix!r}).")


def known(view):
    """``view`` behind the checks of the module's table."""

    @functools.wraps(view)
    def checked(request, *args, **kwargs):
        for name in ("queue_index", "scheduler_index"):
            if name in kwargs:  # the page reads its queue's Redis server (QUEUES_REDIS_SERVERS)
                bounded.use_server(servers.of_queue(queue_name_at(kwargs[name])))
        if "job_id" in kwargs and jobread.is_corrupt(job := check_job(kwargs["job_id"])):
            queue_index = kwargs.get("queue_index", 0)
            return respond(request, view.__name__, queue_index, queue_name_at(queue_index), job)
        if "key" in kwargs:
            check_worker(kwargs["key"])
        try:
            return view(request, *args, **kwargs)
        except NoSuchJobError as exc:
            raise Http404(f"No job {kwargs.get('job_id', '')!r} in Redis.") from exc
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            return bad_entry(request, exc, kwargs)

    return checked


def bad_entry(request, exc, kwargs):
    """The page of a view that met a key of the wrong type no reader of ours caught (rq's own reads):
    it says so, lists the keys of the wrong type of the URL's queue, and reports it once, instead of
    the guard's 503 "Redis did not answer"."""

    entries.report(request.path, f"a key this page reads is of the wrong type ({exc})")
    found = problems(get_queue_by_index(kwargs["queue_index"])) if "queue_index" in kwargs else []
    return render(
        request,
        "queues/bad_entry.html",
        {**panel_context(request), "title": "A Redis entry of the wrong type", "problems": found},
    )
