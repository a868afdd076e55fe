"""The old path of the per-queue pause (docs/operator.md): it lives in ``queues/catalog/pause.py``."""

from queues.catalog.pause import is_paused, pause, paused_names, resume

__all__ = ["pause", "resume", "paused_names", "is_paused"]
