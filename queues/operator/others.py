"""Pause and resume of a queue, cancel of a batch: one target each, through the service like the rest."""

from queues.catalog import pause
from queues.connection.clients import get_connection
from queues.exceptions import UnknownQueue
from queues.operator.results import Result, changed, done, refused
from queues.workflows.cancel import cancel_batch


def toggle(action, name, connection=None) -> Result:
    """Pause (``action`` "pause") or resume the queue ``name``. The Result's ``undo`` puts it back as it was:
    the service calls it when the audit row cannot be written (no change without its row)."""
    connection = connection or get_connection()
    change, back = (pause.pause, pause.resume) if action == "pause" else (pause.resume, pause.pause)
    try:
        was_paused = pause.is_paused(name, connection=connection)
        change(name, connection=connection)  # an unknown queue raises UnknownQueue before it changes anything
    except UnknownQueue as exc:
        return refused(name, str(exc), queue=name, job_ids=())

    def undo():
        if was_paused != pause.is_paused(name, connection=connection):
            back(name, connection=connection)

    what = "leave its jobs alone" if action == "pause" else "take its jobs again"
    return done(name, f"queue {name} {action}d: workers {what}", queue=name, job_ids=(), undo=undo)


def cancel_one_batch(batch_id) -> Result:
    """``queues.cancel_batch`` unaudited (the service writes the row): its waiting members canceled, its running
    ones left to finish."""
    result = cancel_batch(batch_id)
    data = {"canceled": list(result.canceled), "running": list(result.running), "outcome": result.outcome}
    ids = (batch_id, *result.canceled)
    if result.outcome == "gone":
        return changed(batch_id, "gone", f"batch {batch_id} no longer exists (expired)", job_ids=ids, data=data)
    if not result.ok:
        return changed(
            batch_id, result.outcome, f"batch {batch_id} not canceled: it has {result.outcome}", job_ids=ids, data=data
        )
    detail = f"batch {batch_id}: {len(result.canceled)} members canceled, {len(result.running)} running left to finish"
    return done(batch_id, detail, job_ids=ids, data=data)
