"""The panel's home page (the queue table plus pause/resume, job search and the history) and its
``stats.json``, pause and resume, and "find a job by id". The other pages are in ``lists``, ``job``, ``workers``,
``periodic``, ``search`` and ``batches`` (``urls.py`` puts every view behind ``access.guard``)."""

import re
import time

import redis
from django.contrib import messages
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST
from django_rq.settings import get_queues_map

from queues import conf
from queues.board import bounded, readers
from queues.board import history as board_history
from queues.board.access import panel_context
from queues.board.stats import collect, statistics
from queues.connection import servers
from queues.exceptions import UnknownQueue
from queues.failures.operations import find_job
from queues.jobs import read as jobread
from queues.keyspace import entries, keys
from queues.metrics import history as metrics_history
from queues.models import DeadLetter
from queues.operator import actions as operator
from queues.producer import limits

JOB_ID_RE = re.compile(r"[^\s:]{1,200}")


@never_cache
def home(request):
    """The panel's dashboard (queues/board.html): the counts per state of every queue (``stats``: django-rq's
    ``get_statistics`` keys), pause state, held jobs, job search, rq-scheduler's jobs and the recent history;
    no "Cron Schedulers" box (rq's cron, which we do not run). At most 4 round trips whatever the number of
    queues: the counts with the paused set and the history samples, the head jobs, the limit keys (two); one more
    per Redis server besides the default (QUEUES_REDIS_SERVERS: its paused set and history)."""
    # No maintenance on a page: rq's registry cleanup loads expired jobs and writes (readonly.py);
    # a poison head job or a key of the wrong type is shown, not raised (stats.py).
    stats, schedulers, extra = collect(
        {
            "paused": lambda pipe: pipe.smembers(keys.paused_key()),
            "history": lambda pipe: pipe.lrange(keys.history_key(), 0, metrics_history.SAMPLES - 1),
            "history_72h": lambda pipe: pipe.lrange(keys.history_coarse_key(), 0, metrics_history.COARSE_SAMPLES - 1),
        }
    )
    paused = set(readers.members_of(keys.paused_key(), extra["paused"] or set()))
    # Jobs held back by their limit key (queues/producer/limits.py): outside the queue list, so not in
    # django-rq's counts; per queue, and its busiest keys. Each Redis server holds its own queues' keys, its own
    # paused set and the history its workers sample (the default server's came with the counts): one more round
    # trip for the other servers' sets and history, and the limit keys' two, per server.
    in_use, down, charts, now = {}, {}, {}, time.time()
    for server, names in _answering_by_server(stats["queues"], down).items():
        connection = bounded.connection(server)
        if server == servers.DEFAULT:
            raw = (extra["history"] or [], extra["history_72h"] or [])
        else:
            paused_reply, *raw = _server_extra(connection)
            paused |= set(readers.members_of(keys.paused_key(), paused_reply))
        in_use.update(_keys_in_use(connection, names))
        charts.update((row["name"], row) for row in board_history.charts_of(board_history.samples(*raw), now, names))
    for row in board_history.charts_of(([], []), now, [q["name"] for q in stats["queues"] if q.get("down")]):
        charts[row["name"]] = row  # a server down: no history read
    for queue in stats["queues"]:
        queue["paused"] = queue["name"] in paused
        queue["limit_keys"] = in_use.get(queue["name"], [])
        queue["held_jobs"] = sum(use.held for use in queue["limit_keys"])
    context = {
        **panel_context(request),
        **stats,
        **schedulers,
        # Not rq's cron schedulers: this project runs rq-scheduler, so django-rq's box is left out.
        # Completed/failed per minute, from the workers' once-a-minute samples (read with the counts, no write).
        "history": [charts[q["name"]] for q in stats["queues"] if q["name"] in charts],
        # The Redis servers that did not answer (QUEUES_REDIS_SERVERS): named above the table, their queues
        # listed without counts; the other servers' are read as usual.
        "servers_down": down,
        "can_act": request.queue_access.can_act,
        "access": request.queue_access,
        "prefix": conf.prefix(),
    }
    return render(request, "queues/board.html", context)


@never_cache
def home_json(request, token=None):
    """django-rq's ``stats.json`` (same shape: ``{"queues": [...]}`` of ``get_statistics``' keys, plus
    ``canceled_jobs`` and ``problems``), behind the panel's access like every page: a token in the URL
    (django-rq's ``stats.json/<token>``) is no way around it."""
    return JsonResponse(statistics())


def _server_extra(connection):
    """(paused set, minute history, 72-hour history) replies of a server other than the default, in one round
    trip (the default server's are read with the counts)."""
    with connection.pipeline(transaction=False) as pipe:
        pipe.smembers(keys.paused_key())
        pipe.lrange(keys.history_key(), 0, metrics_history.SAMPLES - 1)
        pipe.lrange(keys.history_coarse_key(), 0, metrics_history.COARSE_SAMPLES - 1)
        return pipe.execute(raise_on_error=False)


def _answering_by_server(queues, down):
    """{server: [its queue names]} of the statistics' queues whose server answered; ``down`` gets {server:
    masked URL} of the others."""
    found = {}
    for queue in queues:
        if queue.get("down"):
            down[queue["down"]["server"]] = queue["down"]["url"]
        else:
            found.setdefault(servers.of_queue(queue["name"]), []).append(queue["name"])
    return found


def _keys_in_use(connection, names):
    """``limits.keys_in_use``; rq's set of limit keys of the wrong type, or with a member that is not
    UTF-8, reads as none in use (reported once)."""
    try:
        return limits.keys_in_use(connection, names)
    except (redis.ResponseError, UnicodeDecodeError) as exc:
        if isinstance(exc, redis.ResponseError) and "WRONGTYPE" not in str(exc):
            raise
        entries.report(keys.limit_keys_key(), f"cannot be read ({type(exc).__name__}): no held jobs shown")
        return {}


def _toggle(request, name, action):
    """Pause or resume through the operator service (audited; put back as it was when its row cannot be
    written, then the guard answers 503)."""
    result = operator.one(request, action, name, confirmed=True, queue=_Bounded(name))
    if not result.ok:
        messages.error(request, result.detail)
        return redirect("django_rq:home")
    messages.success(request, f"Queue {name} {'paused' if action == 'pause' else 'resumed'}.")
    return redirect("django_rq:home")


class _Bounded:
    """The panel's bounded Redis client of the queue ``name``'s server, for the service's pause and resume."""

    def __init__(self, name):
        self.name = name

    @property
    def connection(self):
        try:
            return bounded.queue_connection(self.name)
        except UnknownQueue:  # the service refuses it, naming the declared queues
            return bounded.connection()


@never_cache
@require_POST
def pause_queue(request, name):
    return _toggle(request, name, "pause")


@never_cache
@require_POST
def resume_queue(request, name):
    return _toggle(request, name, "resume")


def _find_anywhere(job_id):
    """``find_job`` on each Redis server in turn (QUEUES_REDIS_SERVERS), the default first: the first that has
    the job or a trace of it; else the default server's answer."""
    first = None
    for server in servers.names():
        result = find_job(job_id, connection=bounded.connection(server))
        if result["exists"] or result["locations"]:
            return result
        first = first or result
    return first


@never_cache
def find(request):
    """Find a job by id in every declared queue and registry; one match goes straight to it."""

    job_id = request.GET.get("job_id", "").strip()
    context = {**panel_context(request), "job_id": job_id, "result": None, "error": "", "title": "Find a job"}
    if job_id and not JOB_ID_RE.fullmatch(job_id):
        context["error"] = f"{job_id[:80]!r} is not a job id (1-200 characters, no spaces or ':')."
    elif job_id:
        result = _find_anywhere(job_id)
        index = get_queues_map()
        if result["origin"] in index:
            # As the job lists show it: an id rq rejects ("a/b") still fits one URL segment.
            shown = jobread.shown_id(jobread.normal_id(job_id))
            result["url"] = reverse("django_rq:job_detail", args=[index[result["origin"]], shown])
        result["places"] = [
            {
                "queue": q,
                "place": p,
                "queue_url": reverse("django_rq:queue_details", args=[index[q]]) if q in index else "",
            }
            for q, p in result["locations"]
        ]
        # Its own dead letter, and the one it was enqueued to retry (both by the indexed job id).
        ids = [job_id] + ([result["retry_of"]] if result["retry_of"] else [])
        result["dead_letters"] = [
            {"row": row, "url": reverse("admin:queues_deadletter_change", args=[row.pk])}
            for row in DeadLetter.objects.filter(prefix=conf.prefix(), job_id__in=ids)
        ]
        context["result"] = result
        if result.get("url") and request.GET.get("go") == "1":
            return redirect(result["url"])
    return render(request, "queues/find.html", context)
