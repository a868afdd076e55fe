"""Per-queue pause: a flag in Redis that workers honour (the jobs stay in the queue).

Key: ``<prefix>:optima:paused`` — a Redis set of paused queue names (one key, so workers,
the panel and /metrics read every queue's state in one command). Workers check it inside their
pop, atomically (``queues.worker.dequeue``): a job of a queue paused a moment ago is not taken. It lives
in the catalog, below the worker, so that the panel, /metrics and the tasks read it without reaching
into ``worker/`` (``queues.worker.pause`` is its old path, docs/operator.md).
"""

from rq.utils import as_text

from queues.catalog.queues import get_config
from queues.connection.clients import get_connection
from queues.keyspace.keys import paused_key


def pause(name, connection=None):
    get_config(name)
    _conn(connection).sadd(paused_key(), name)


def resume(name, connection=None):
    get_config(name)
    _conn(connection).srem(paused_key(), name)


def paused_names(connection=None):
    return {as_text(n) for n in _conn(connection).smembers(paused_key())}


def is_paused(name, connection=None):
    return bool(_conn(connection).sismember(paused_key(), name))


def _conn(connection):
    return get_connection() if connection is None else connection
