"""Retry, discard and cancel-the-retry of one dead letter: ``queues.failures.operations``' answer
(``Outcome``: ok / skipped / error) turned into the service's (done / changed meanwhile / refused).

A target is ``(pk, queue, job_id)`` (a ``values_list`` of the rows): the audit row names the queue and
the job without reading the row again. The rules of each operation stay in ``operations``' docstring."""

from queues.failures.operations import Outcome as Operated
from queues.failures.operations import cancel_retry, discard_dead_letter, retry_dead_letter
from queues.models import DeadLetter
from queues.operator.results import Result, changed, done, refused

OPERATIONS = {"retry": retry_dead_letter, "discard": discard_dead_letter, "cancel_retry": cancel_retry}


def run(action, target, **options):
    """``action`` on the dead letter ``target`` (pk, queue, job_id), with ``options`` (``accept_unverified``:
    the one-row retry confirmed on its page) -> Result. An exception is this row's answer ("refused")."""
    pk, queue, job_id = target
    try:
        operated = OPERATIONS[action](pk, **options)
    except DeadLetter.DoesNotExist:
        return changed(job_id, "gone", f"dead letter {pk} no longer exists", queue=queue)
    except Exception as exc:  # noqa: BLE001 — one row that raises must not stop the rest; audited as an error
        return refused(job_id, f"{type(exc).__name__}: {exc}", queue=queue, data={"raised": True})
    return _result(job_id, queue, pk, operated)


def _result(job_id, queue, pk, operated: Operated) -> Result:
    new = operated.job_id if operated.job_id and operated.job_id != job_id else ""
    ids = (job_id, new) if new else (job_id,)
    if operated.outcome == "ok":
        return done(job_id, operated.detail, queue=queue, job_ids=ids, new_job=new)
    if operated.outcome == "skipped" and operated.unverified:
        return refused(job_id, operated.detail, queue=queue, job_ids=ids, unverified=True)
    if operated.outcome == "skipped":
        status = DeadLetter.objects.filter(pk=pk).values_list("status", flat=True).first() or "gone"
        return changed(job_id, status, operated.detail, queue=queue, job_ids=ids)
    return refused(job_id, operated.detail, queue=queue, job_ids=ids)
