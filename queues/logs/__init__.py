"""What the queues write to the log, and how: one line per job outcome, quiet when nothing happens.

- ``outcome``: the one line per job outcome (logger ``queues.jobs``): succeeded at INFO, a retry at
  WARNING without a traceback (it goes at DEBUG), a dead letter at ERROR with it, a job stopped by an
  operator (canceled) at WARNING; each with the job's id, queue, function, attempt and duration.
- ``quiet``: rq's own per-job lines ("Successfully completed", "Job OK", the traceback of each failed
  attempt) and its periodic registry clean-up lines said again at DEBUG, since ``outcome`` says it once.
- ``console``: the worker's and scheduler's lines on the console when the project configured no logging for
  them (as rq's worker does for its own); untouched when ``LOGGING`` reaches them.
- ``formats``: ``QUEUES_LOG_FORMAT`` (``plain`` or ``json``) and the JSON formatter for log shippers.
- ``hook``: the worker's hook (``queues/events/hooks.py``) that installs ``quiet`` and writes ``outcome``.

docs/operations.md#logs lists the lines and their levels.
"""
