"""Jobs of the priority-band tests (tests/queues/producer/test_priority.py): each run appends its label to a file."""

from pathlib import Path

import queues
from queues import RetryAfter
from tests.jobs import hold_until


@queues.job
def record(path, label, retries=0):
    """Append ``label`` to ``path``; the first ``retries`` runs then ask for a retry at once (RetryAfter(0))."""
    with open(path, "a") as f:
        f.write(label + "\n")
    if Path(path).read_text().split().count(label) <= retries:
        raise RetryAfter(0, f"{label}: again")
    return label


@queues.job
def fail_once(path, label):
    """Append ``label`` to ``path``; the first run then fails (a plain exception: the queue's backoff applies)."""
    with open(path, "a") as f:
        f.write(label + "\n")
    if Path(path).read_text().split().count(label) == 1:
        raise RuntimeError(f"{label}: first run fails")
    return label


@queues.job
def wait_until_moved(path, label, moved_id, queue_name, wait_max=30.0):
    """Append ``label`` to ``path``, then wait (at most ``wait_max`` s) until RQ's scheduler has moved ``moved_id``
    out of ``queue_name``'s scheduled registry: the next job this worker pops then has both waiting."""
    from rq import get_current_job
    from rq.registry import ScheduledJobRegistry

    with open(path, "a") as f:
        f.write(label + "\n")
    connection = get_current_job().connection
    key = ScheduledJobRegistry(queue_name, connection=connection).key
    hold_until(lambda: connection.zscore(key, moved_id) is None, wait_max)
    return label
