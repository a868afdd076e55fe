"""Jobs of the benchmarks. Plain functions importable without Django, so that a plain RQ worker
(which never imports Django) runs the very same function as this project's worker. The decorator
only registers the function (queues/catalog/jobs.py imports nothing but the standard library)."""

import queues


@queues.job
def noop():
    """Does nothing: what is left of a job's time is the worker's own cost."""
    return None
