"""Kept for settings: ``RQ['SCHEDULER_CLASS'] = "queues.scheduler.PrefixedScheduler"`` is written in
users' settings files. The class lives in ``queues/periodic/scheduler.py``; nothing in the app imports
this module."""

from queues.periodic.scheduler import PrefixedScheduler

__all__ = ["PrefixedScheduler"]
