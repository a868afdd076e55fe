"""What happens to a job, and who hears it: below the worker, so that everything may listen.

- ``signals``: the Django signals of a job's life (``job_started`` ... ``job_dead``), for feature code
  (docs/lifecycle.md; ``queues.worker.signals`` is their old path).
- ``hooks``: the worker's one small interface to its cross-cutting concerns (metrics, tracing, logs):
  a ``Hook`` base class with no-op methods, the list registered at the app's ready, and the calls
  the worker and the failure handler make at each point of a job's life.
"""
