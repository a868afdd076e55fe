"""Queue names -> prefixed RQ queues.

A queue is declared once — in ``settings.OPTIMA_QUEUES`` or in an installed app's ``queues.py``
(``QUEUES = {"name": {...options}}``) or AppConfig attribute ``queues`` — and from then on exists
for enqueueing, for ``manage.py rqworker`` (no names: every declared queue), for django-rq's panel
and for ``/metrics``. ``queues/catalog/queues.py`` merges the declarations (settings win over an
app's, key by key); this module turns a declared name into RQ objects.

Keys: rq 3.0 prefixes all of its own keys with ``RQ_KEY_PREFIX``, which ``QUEUE_PREFIX`` sets
(see docs/decisions.md). A queue named ``orders-sync`` lives at ``<prefix>:queue:orders-sync``.
"""

from typing import TYPE_CHECKING

import redis

from queues.catalog import queues as declarations
from queues.catalog.classes import OptimaJob, OptimaQueue  # noqa: F401  (public names of this module)
from queues.catalog.queues import QueueConfig, declared, get_config, queue_names  # noqa: F401  (public names)
from queues.connection import (
    clients as _connection,  # aliased: get_queue() and fetch_job() take a `connection` argument
)
from queues.connection import servers
from queues.connection.djangorq import rq_queues_setting  # noqa: F401  (public here since django-rq was wired from here)
from queues.exceptions import QueueUnavailable

if TYPE_CHECKING:
    from rq.job import Job


def get_queue(name: str, connection: redis.Redis | None = None) -> OptimaQueue:
    """The RQ queue declared as ``name``: prefixed, JSON, bound to the connection of the Redis server it
    lives on (its ``"redis"`` option; default: the default server)."""
    config = get_config(name)
    if connection is None:
        connection = _connection.queue_connection(name)
    return OptimaQueue(name, connection=connection, default_timeout=config.options["timeout"])


def fetch_job(job_id: str, connection: redis.Redis | None = None) -> "Job | None":
    """The JSON job with this id, whatever its queue, or None when Redis no longer has it.

    Without ``connection``, on every Redis server of the queues (QUEUES_REDIS_SERVERS), the default first: a
    server that does not answer is passed over while another has the job. Raises ``QueueUnavailable`` (masked
    URL) when no server that answered has it and one could not be reached.
    """
    if connection is not None:
        return _fetch_from(job_id, connection)
    failed = None
    for server in servers.names():
        client = _connection.get_connection(server)
        try:
            job = _fetch_from(job_id, client)
        except QueueUnavailable as exc:
            failed = failed or exc
            continue
        if job is not None:
            return job
    if failed is not None:
        raise failed
    return None


def job_connection(job_id: str) -> redis.Redis:
    """The client of the Redis server that holds job ``job_id``: the default server's when it is the only one
    (no round trip), else the first server whose EXISTS finds the job (the default first; a server that does not
    answer is passed over), or the default's when none does (the caller then reads "no such job", or fails on it).
    """
    if not servers.several():
        return _connection.get_connection()
    for server in servers.names():
        client = _connection.get_connection(server)
        try:
            if OptimaJob.exists(job_id, connection=client):
                return client
        except redis.RedisError:
            continue
    return _connection.get_connection()


def _fetch_from(job_id, connection):
    try:
        if not OptimaJob.exists(job_id, connection=connection):
            return None
        return OptimaJob.fetch(job_id, connection=connection)
    except redis.RedisError as exc:
        raise _connection.unavailable(exc, connection=connection) from exc


def reset():
    """Forget the merged declarations and the cached Redis clients (both also reset themselves
    when a relevant setting changes)."""
    declarations.reset()
    _connection.reset()
