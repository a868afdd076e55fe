"""Kept for settings: ``CACHES[...]["OPTIONS"]["pool_class"] = "queues.sentinel.CacheSentinelPool"`` is
written in users' settings files. The class lives in ``queues/connection/sentinel.py``; nothing in the app
imports this module."""

from queues.connection.sentinel import CacheSentinelPool

__all__ = ["CacheSentinelPool"]
