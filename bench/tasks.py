"""Tasks of the benchmarks (Django's Tasks API, ``@task``): need Django set up, unlike bench/jobs.py.
``QUEUE_JOB_MODULES`` names this module for our workers (bench/throughput.py)."""

from django_tasks import task


@task
def noop():
    """Does nothing, as ``bench.jobs.noop``: what is left is the cost of a Task over a job."""
    return None
