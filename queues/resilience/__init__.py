"""At-least-once delivery, graceful shutdown and surviving Redis outages, for rq 3.0.

- ``worker.py``: ``ResilienceMixin``, composed first into ``queues.worker.OptimaWorker``: start, stop,
  signals, the main loop's Redis calls; built from
- ``supervision.py``: one job in the worker's process, from the dequeue to an outcome never lost, and
- ``horse.py``: inside the work horse, recording the start and outcome through an outage.
- ``dequeue.py``: atomic LMOVE dequeue from several queues (rq uses BLPOP there and can lose a job).
- ``liveness.py``: the worker's alive key and lifeline thread; children that die with their worker.
- ``abandoned.py``: the scan that re-runs or dead-letters the jobs of dead workers.
- ``schedulers.py``: RQ's scheduler and rq-scheduler, kept alive through outages.
- ``outage.py``: which errors mean "Redis is away", backoff and logging.
- ``config.py``: the options (``OPTIMA_QUEUES_OPTIONS``, docs/settings.md), validated.

The operator's side — stop timeouts, scale-out, idempotency, what an outage looks like — is in
docs/operations.md.
"""
from .schedulers import ResilientRQScheduler, run_rq_scheduler
from .worker import ResilienceMixin

__all__ = ["ResilienceMixin", "ResilientRQScheduler", "run_rq_scheduler"]
