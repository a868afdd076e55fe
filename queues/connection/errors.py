"""The public API's promise about Redis errors: its callers see ``QueueUnavailable``, never a redis exception.

``queues/__init__.py`` hands out its functions that talk to Redis through ``answers_unavailable``: a
``redis.RedisError`` (refused, timed out, dropped, an error reply) escaping one of them becomes the
``QueueUnavailable`` of ``clients.unavailable`` (the masked URL, what to check), chained to the original.
Inside the app the functions are the plain ones: internal callers keep telling redis's errors apart.
"""

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import redis

from queues.connection.clients import unavailable

P = ParamSpec("P")
R = TypeVar("R")


def answers_unavailable(func: Callable[P, R]) -> Callable[P, R]:
    """``func`` with every ``redis.RedisError`` it lets out raised as ``QueueUnavailable``."""

    @functools.wraps(func)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except redis.RedisError as exc:
            raise unavailable(exc) from exc

    return guarded
