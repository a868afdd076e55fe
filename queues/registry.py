"""Kept for settings: ``RQ['JOB_CLASS'] = "queues.registry.OptimaJob"`` and ``RQ['QUEUE_CLASS'] =
"queues.registry.OptimaQueue"`` are written in users' settings files. The classes live in
``queues/catalog/classes.py``; nothing in the app imports this module."""

from queues.catalog.classes import OptimaJob, OptimaQueue

__all__ = ["OptimaJob", "OptimaQueue"]
