"""The dashboard's per-queue statistics, ``stats.json`` and ``manage.py rqstats``: counts per state of every
queue in two pipelined round trips per Redis, poison-proof, and no django-rq internals.

The dictionary has the keys of django-rq 4.2's ``get_statistics`` (``stats.json`` keeps its shape for
scrapers: name, jobs, oldest_job_timestamp, index, connection_kwargs, scheduler_pid, workers and the
registries' counts), plus ``canceled_jobs`` and ``problems`` (a key that is not of the type rq expects,
shown on the dashboard). It is read in two round trips per Redis whatever the number of queues:

1. one pipeline for every queue: TYPE of its keys (``problems``), LLEN of its three priority bands, ZCARD
   of its registries, SCARD of its worker set, the head of each band (LINDEX 0: the oldest waiting job)
   and the name of rq's scheduler holding its lock; plus whatever the caller adds (``extra``: the
   dashboard's paused set and history, rq-scheduler's count);
2. one pipeline for the head jobs' hashes (``jobread.load``: a poison one shows "corrupt") and the
   schedulers' PIDs.

A key of the wrong type counts 0 (reported once: ``entries.report``) and is listed in ``problems``; a
head job whose hash is gone shows "-". Nothing is written: no registry cleanup (the workers' maintenance
does it), no unpickling.
"""

import datetime

import redis
from django.utils import timezone
from django_rq.settings import get_queues_list
from redis.sentinel import SentinelConnectionPool
from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler
from rq.worker_registration import WORKERS_BY_QUEUE_KEY

from queues.board import bounded, readonly
from queues.connection import servers
from queues.jobs import read as jobread
from queues.keyspace import entries
from queues.periodic.plan import scheduled_jobs_key

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
REGISTRY_COUNTS = {  # the statistics' key -> the registry (``EXPECTED_TYPES``' name)
    "started_jobs": "started",
    "finished_jobs": "finished",
    "failed_jobs": "failed",
    "deferred_jobs": "deferred",
    "scheduled_jobs": "scheduled",
    "canceled_jobs": "canceled",
}
# django-rq's allowlist of connection settings shown (no password, no redis-py internals).
DISPLAYABLE_CONNECTION_KWARGS = (
    "host",
    "port",
    "db",
    "username",
    "client_name",
    "service_name",
    "sentinels",
    "unix_socket_path",
    "path",
    "socket_timeout",
    "socket_connect_timeout",
    "socket_keepalive",
    "health_check_interval",
    "protocol",
    "encoding",
    "decode_responses",
)


def connection_kwargs(connection):
    """The connection's settings an operator may see (django-rq's ``get_displayable_connection_kwargs``)."""
    pool = connection.connection_pool
    found = pool.connection_kwargs.copy()
    if isinstance(pool, SentinelConnectionPool):
        found["service_name"] = getattr(pool, "service_name", None)
        sentinels = [s.connection_pool.connection_kwargs for s in pool.sentinel_manager.sentinels]
        if sentinels:
            found["host"], found["port"] = sentinels[0].get("host"), sentinels[0].get("port")
            found["sentinels"] = [
                (s.get("host"), s.get("port"))
                for s in sentinels
                if s.get("host") is not None and s.get("port") is not None
            ]
    return {key: found[key] for key in DISPLAYABLE_CONNECTION_KWARGS if found.get(key) is not None}


def where(kwargs):
    """``host:port/db`` of ``connection_kwargs`` (django-rq's key of a scheduler's connection)."""
    return f"{kwargs.get('host', 'NOHOST')}:{kwargs.get('port', 6379)}/{kwargs.get('db', 0)}"


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
    return _problems(keys, types)


def _problems(keys, types):
    return [
        f"{key} is a {jobread.text(kind)}, not a {EXPECTED_TYPES[name].decode()}"
        for (name, key), kind in zip(keys.items(), types)
        if not isinstance(kind, Exception) and kind not in (b"none", EXPECTED_TYPES[name])
    ]


def _count(key, reply):
    """An LLEN/ZCARD/SCARD reply as a number: a key of the wrong type counts 0 (reported)."""
    if isinstance(reply, redis.ResponseError):
        return readonly.wrong_type(key, reply, 0)
    if isinstance(reply, Exception):
        raise reply
    return int(reply)


def local_time(when):
    """``when`` (naive: UTC, rq's convention) in the configured time zone, as django-rq showed it."""
    utc = when.replace(tzinfo=datetime.UTC) if timezone.is_naive(when) else when.astimezone(datetime.UTC)
    return utc.astimezone(timezone.get_default_timezone()).strftime("%Y-%m-%d, %H:%M:%S")


class _QueueRead:
    """The commands of one queue in the first pipeline, then its figures from the replies."""

    def __init__(self, index, queue):
        self.index, self.queue = index, queue
        self.keys = _keys(queue)
        self.lock_key = RQScheduler.get_locking_key(queue.name)
        self.workers_key = WORKERS_BY_QUEUE_KEY % queue.name

    def queue_commands(self, pipe):
        for key in self.keys.values():
            pipe.type(key)
        for key in self.queue.band_keys:
            pipe.llen(key)
        for name in REGISTRY_COUNTS.values():
            pipe.zcard(self.keys[name])
        for key in self.queue.band_keys:
            pipe.lindex(key, 0)
        pipe.scard(self.workers_key)
        pipe.get(self.lock_key)
        return len(self.keys) + 3 + len(REGISTRY_COUNTS) + 3 + 2

    def read(self, replies):
        replies = list(replies)
        types, replies = replies[: len(self.keys)], replies[len(self.keys) :]
        bands, replies = replies[:3], replies[3:]
        counts, replies = replies[: len(REGISTRY_COUNTS)], replies[len(REGISTRY_COUNTS) :]
        heads, (workers, lock) = replies[:3], replies[3:]
        self.problems = _problems(self.keys, types)
        self.jobs = sum(_count(key, reply) for key, reply in zip(self.queue.band_keys, bands))
        self.counts = {
            stat: _count(self.keys[name], reply) for (stat, name), reply in zip(REGISTRY_COUNTS.items(), counts)
        }
        self.workers = _count(self.workers_key, workers)
        # The oldest waiting job: the head of the first band (pop order) that has one.
        self.head = next((h for h in heads if isinstance(h, bytes)), None)
        self.scheduler = lock.decode("utf-8", "replace") if isinstance(lock, bytes) else None
        if isinstance(lock, redis.ResponseError):
            readonly.wrong_type(self.lock_key, lock, None)

    def second_commands(self, pipe):
        """The read of the head job (``jobread.read_hash``), HGET of the scheduler's PID: the commands queued."""
        queued = 0
        if self.head is not None:
            jobread.read_hash(pipe, jobread.normal_id(self.head))
            queued += 1
        if self.scheduler is not None:
            pipe.hget(SCHEDULER_KEY_TEMPLATE % self.scheduler, "pid")
            queued += 1
        return queued

    def finish(self, replies):
        replies = list(replies)
        oldest = "-"
        if self.head is not None:
            job = jobread.load(jobread.normal_id(self.head), replies.pop(0), self.queue.connection, check_origin=False)
            if jobread.is_corrupt(job):
                oldest = "corrupt"
            elif job is not None and job.enqueued_at:
                oldest = local_time(job.enqueued_at)
        pid = None
        if self.scheduler is not None:
            reply = replies.pop(0)
            try:
                if isinstance(reply, Exception):
                    raise reply
                pid = int(reply) if reply else None
            except (redis.ResponseError, UnicodeDecodeError, ValueError) as exc:
                entries.report(f"the scheduler lock of {self.queue.name}", f"cannot be read ({exc}): no PID shown")
        kwargs = connection_kwargs(self.queue.connection)
        return {
            "name": self.queue.name,
            "jobs": self.jobs,
            "oldest_job_timestamp": oldest,
            "index": self.index,
            "connection_kwargs": kwargs,
            # rq's scheduler (a worker's child) holding the queue's lock: django-rq's get_scheduler_pid answers
            # False whenever rq-scheduler is installed, so its column was always empty.
            "scheduler_pid": pid,
            "workers": self.workers,
            **self.counts,
            "problems": self.problems,
        }


def _execute(pipe):
    replies = pipe.execute(raise_on_error=False)
    for reply in replies:  # a lost connection or the deadline is the guard's 503, never a count of 0
        if isinstance(reply, (redis.ConnectionError, redis.TimeoutError)):
            raise reply
    return replies


def collect(extra=None):
    """``(statistics, schedulers, extra replies)``: ``statistics()``, ``scheduler_statistics()``, and the
    replies of the commands ``extra`` (``{name: function(pipe) queueing one command}``) asks of the default
    server's Redis (else the first queue's), sent in the same first round trip (the dashboard's other reads).

    Each Redis server is read apart (QUEUES_REDIS_SERVERS); one that does not answer leaves its queues in the
    statistics with their name, ``"down"`` (the server's name and masked URL) and no counts, and the others'
    are read as usual. Only when every server is down does the Redis error reach the guard (its 503 page).
    ``extra``'s replies are then None when their server was the one down."""
    reads = [_QueueRead(index, readonly.get_queue_by_index(index)) for index, _ in enumerate(get_queues_list())]
    groups = {}  # host:port/db -> the queues read there, the default server's first
    for read in sorted(reads, key=lambda r: servers.of_queue(r.queue.name) != servers.DEFAULT):
        groups.setdefault(where(connection_kwargs(read.queue.connection)), []).append(read)
    extra = extra or {}
    extra_replies = dict.fromkeys(extra)
    schedulers, failed = {}, None
    for number, (place, group) in enumerate(groups.items()):
        try:
            replies = _read_group(group, extra if number == 0 else {})
        except redis.RedisError as exc:
            failed = exc
            server = servers.of_queue(group[0].queue.name)
            for read in group:
                read.result = _down(read, server)
            continue
        # rq-scheduler's jobs on this Redis (one scheduler per Redis: django-rq's key is the connection).
        schedulers[place] = {"count": scheduler_count(replies.pop(0)), "index": group[0].index}
        if number == 0:
            extra_replies = dict(zip(extra, replies))
    if failed is not None and not schedulers:
        raise failed  # no server answered: the guard's 503 page
    return {"queues": [read.result for read in reads]}, {"schedulers": schedulers}, extra_replies


def _read_group(group, extra):
    """Both round trips of the queues of one Redis; -> the replies of rq-scheduler's count and of ``extra``."""
    with group[0].queue.connection.pipeline(transaction=False) as pipe:
        sizes = [read.queue_commands(pipe) for read in group]
        pipe.zcard(scheduled_jobs_key())
        for add in extra.values():
            add(pipe)
        replies = _execute(pipe)
    for read, size in zip(group, sizes):
        read.read(replies[:size])
        replies = replies[size:]
    rest = replies
    with group[0].queue.connection.pipeline(transaction=False) as pipe:
        sizes = [read.second_commands(pipe) for read in group]
        replies = _execute(pipe) if sum(sizes) else []
    for read, size in zip(group, sizes):
        read.result = read.finish(replies[:size])
        replies = replies[size:]
    return rest


def _down(read, server):
    """The statistics of a queue whose Redis server did not answer: its name, index and the server, no counts."""
    return {
        "name": read.queue.name,
        "index": read.index,
        "jobs": None,
        "oldest_job_timestamp": "-",
        "connection_kwargs": connection_kwargs(read.queue.connection),
        "scheduler_pid": None,
        "workers": None,
        **dict.fromkeys(REGISTRY_COUNTS),
        "problems": [],
        "down": {"server": server, "url": bounded.masked_url(None if server == servers.DEFAULT else server)},
    }


def statistics():
    """The keys of django-rq's ``get_statistics`` (what ``stats.json`` answered), plus ``canceled_jobs`` and
    ``problems``; never runs maintenance. Two round trips per Redis."""
    return collect()[0]


def scheduler_statistics():
    """django-rq's ``get_scheduler_statistics`` (same keys): ``{"schedulers": {"host:port/db": {"count",
    "index"}}}``, rq-scheduler's jobs per Redis, counted by ZCARD (its set of the wrong type counts 0)."""
    return collect()[1]


def scheduler_count(reply):
    """rq-scheduler's ZCARD reply: its set of the wrong type counts 0 (reported)."""
    if isinstance(reply, redis.ResponseError):
        entries.report(scheduled_jobs_key(), "not a sorted set (WRONGTYPE): read as empty")
        return 0
    return int(reply or 0)
