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
from queues.connection.djangorq import rq_queues_setting  # noqa: F401  (public here since django-rq was wired from here)

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

    Raises ``QueueUnavailable`` (masked URL) when Redis cannot be reached.
    """
    connection = connection or _connection.get_connection()
    try:
        if not OptimaJob.exists(job_id, connection=connection):
            return None
        return OptimaJob.fetch(job_id, connection=connection)
    except redis.RedisError as exc:
        raise _connection.unavailable(exc) from exc


def reset():
    """Forget the merged declarations and the cached Redis clients (both also reset themselves
    when a relevant setting changes)."""
    declarations.reset()
    _connection.reset()
