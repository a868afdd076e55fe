"""Per-queue pause: a flag in Redis that workers honour (the jobs stay in the queue).

Key: ``<prefix>:optima:paused`` — a Redis set of paused queue names (one key, so workers,
the panel and /metrics read every queue's state in one command). Workers check it inside their
pop, atomically (``queues.worker.dequeue``): a job of a queue paused a moment ago is not taken. It lives
in the catalog, below the worker, so that the panel, /metrics and the tasks read it without reaching
into ``worker/`` (``queues.worker.pause`` is its old path, docs/operator.md).

With several Redis servers (QUEUES_REDIS_SERVERS) each server has its own set, holding the names of its own
queues: a queue's flag is where its workers pop. ``paused_names()`` without a connection reads every server.
"""

from rq.utils import as_text

from queues.catalog.queues import get_config
from queues.connection import servers
from queues.connection.clients import get_connection, queue_connection
from queues.keyspace.keys import paused_key


def pause(name, connection=None):
    get_config(name)
    _conn(connection, name).sadd(paused_key(), name)


def resume(name, connection=None):
    get_config(name)
    _conn(connection, name).srem(paused_key(), name)


def paused_names(connection=None):
    if connection is not None:
        return {as_text(n) for n in connection.smembers(paused_key())}
    found = set()
    for server in servers.names():
        found |= {as_text(n) for n in get_connection(server).smembers(paused_key())}
    return found


def is_paused(name, connection=None):
    return bool(_conn(connection, name).sismember(paused_key(), name))


def _conn(connection, name):
    """``connection``, else the client of the server the queue ``name`` lives on."""
    return queue_connection(name) if connection is None else connection
