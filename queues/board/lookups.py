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
| ``key`` | not a worker key of this prefix, or no such worker |

A ``NoSuchJobError`` raised later by the view (the job deleted meanwhile) is a 404 too.
"""
import functools

from django.http import Http404
from django_rq.settings import get_queues_list
from rq.exceptions import NoSuchJobError
from rq.worker import Worker

from queues.board import bounded
from queues.jobs import read as jobread


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
    prefix = Worker.redis_worker_namespace_prefix
    if not key.startswith(prefix) or not bounded.connection().exists(key):
        raise Http404(f"No worker with key {key!r} (worker keys start with {prefix!r}).")


def known(view):
    """``view`` behind the checks of the module's table."""

    @functools.wraps(view)
    def checked(request, *args, **kwargs):
        for name in ("queue_index", "scheduler_index"):
            if name in kwargs:
                queue_name_at(kwargs[name])
        if "job_id" in kwargs and jobread.is_corrupt(job := check_job(kwargs["job_id"])):
            from queues.board.corrupt import respond

            queue_index = kwargs.get("queue_index", 0)
            return respond(request, view.__name__, queue_index, queue_name_at(queue_index), job)
        if "key" in kwargs:
            check_worker(kwargs["key"])
        try:
            return view(request, *args, **kwargs)
        except NoSuchJobError as exc:
            raise Http404(f"No job {kwargs.get('job_id', '')!r} in Redis.") from exc

    return checked
