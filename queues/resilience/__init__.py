"""At-least-once delivery, graceful shutdown and surviving Redis outages, for rq 3.0.

Plain objects and functions that ``queues.worker`` hands over to (each tested in-process):

- ``stop.py``: ``StopState``, a worker's stop request, grace period and cold stop.
- ``supervision.py``: one job in a forking worker's process: ``HorseWatch`` and ``verdict``.
- ``horse.py``: in the job's process, recording the start and outcome through an outage.
- ``dequeue.py``: ``Dequeuer``, an atomic, pause-aware LMOVE pop from one queue or several.
- ``liveness.py``: the worker's alive key and lifeline thread; children that die with their worker.
- ``abandoned.py``: the scan that re-runs or dead-letters the jobs of dead workers.
- ``schedulers.py``: RQ's scheduler and rq-scheduler, kept alive through outages.
- ``outage.py``: which errors mean "Redis is away", backoff and logging.
- ``config.py``: the options (``OPTIMA_QUEUES_OPTIONS``, docs/settings.md), validated.

The operator's side — stop timeouts, scale-out, idempotency, what an outage looks like — is in
docs/operations.md.
"""
from .schedulers import ResilientRQScheduler, SchedulerKeeper, run_rq_scheduler

__all__ = ["ResilientRQScheduler", "SchedulerKeeper", "run_rq_scheduler"]
