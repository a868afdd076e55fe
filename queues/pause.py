"""Per-queue pause: a flag in Redis that workers honour (the jobs stay in the queue).

Key: ``<prefix>:optima:paused`` — a Redis set of paused queue names (one key, so workers,
the panel and /metrics read every queue's state in one command).
"""
from . import conf
from .registry import get_config


def paused_key():
    return conf.app_key("paused")


def pause(name, connection=None):
    get_config(name)
    _conn(connection).sadd(paused_key(), name)


def resume(name, connection=None):
    get_config(name)
    _conn(connection).srem(paused_key(), name)


def paused_names(connection=None):
    return {n.decode() if isinstance(n, bytes) else n for n in _conn(connection).smembers(paused_key())}


def is_paused(name, connection=None):
    return bool(_conn(connection).sismember(paused_key(), name))


def _conn(connection):
    if connection is not None:
        return connection
    from .connection import get_connection

    return get_connection()


class PauseMixin:
    """Worker side of pause (placeholder: the operator work makes workers skip paused queues)."""
