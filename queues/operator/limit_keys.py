"""Pause and resume of one limit key (the panel's limits page): its held jobs wait, the rest of its queue runs.

A target is the key scoped to its queue, ``"<queue>:<limit key>"`` (``queues.producer.limits.scoped``), with a
rate or a concurrency only. The pause is the key's rate hash's ``paused`` field (``queues.producer.rates``): its
held jobs stay held (those its concurrency held are moved to the key's rate held set, where no promotion of rq's
looks), its jobs already queued or running still run, and a resume releases what the key's budget allows at
once (a key without a rate: what its concurrency allows)."""

from queues.catalog.lookup import get_config
from queues.connection.clients import get_connection
from queues.exceptions import UnknownQueue
from queues.operator.results import Result, done, refused
from queues.producer import limits, rates


def toggle(action, scoped_key, connection=None) -> Result:
    """Pause (``action`` "pause_key") or resume the limit key ``scoped_key``. The Result's ``undo`` puts it back
    as it was (the service calls it when the audit row cannot be written)."""
    connection = connection or get_connection()
    queue_name, limit_key = limits.split(str(scoped_key))
    problem = limits.key_problem(limit_key)
    if problem:
        return refused(scoped_key, f"limit key {limit_key!r} {problem}", queue=queue_name, job_ids=())
    try:
        get_config(queue_name)
    except UnknownQueue as exc:
        return refused(scoped_key, str(exc), queue=queue_name, job_ids=())
    was_paused = rates.is_paused(connection, queue_name, limit_key)
    if action == "pause_key":
        rates.pause(connection, queue_name, limit_key)
        detail = f"limit key {limit_key} of queue {queue_name} paused: its held jobs wait"
    else:
        released = rates.resume(connection, queue_name, limit_key)
        detail = f"limit key {limit_key} of queue {queue_name} resumed: {len(released)} held jobs released now"

    def undo():
        if was_paused != rates.is_paused(connection, queue_name, limit_key):
            (rates.pause if was_paused else rates.resume)(connection, queue_name, limit_key)

    return done(scoped_key, detail, queue=queue_name, job_ids=(), undo=undo)
