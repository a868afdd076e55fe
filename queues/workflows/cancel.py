"""``queues.cancel_batch(id, request=None, reason="")``: no callback fires after it; its waiting members
are canceled (queued, scheduled, in the outbox: ``queues.cancel``), the running ones finish; audited."""

from dataclasses import dataclass
from typing import Any

from queues import audit
from queues.connection.clients import get_connection
from queues.keyspace import keys
from queues.producer.cancel import cancel
from queues.workflows import scripts
from queues.workflows.batches import _now_args, set_keys


@dataclass(frozen=True)
class BatchCanceled:
    """``outcome``: ``canceled``, ``gone`` (no such batch) or the state it had already ended in;
    ``canceled`` the member ids canceled now, ``running`` those left to finish."""

    outcome: str
    canceled: tuple[str, ...] = ()
    running: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.outcome == "canceled"


def cancel_batch(batch_id: str, request: Any = None, reason: str = "") -> BatchCanceled:
    connection = get_connection()
    batch_keys = set_keys(batch_id)
    reply = connection.eval(scripts.CANCEL, len(batch_keys), *batch_keys, *_now_args())
    outcome, left = (reply[0].decode(), [r.decode() for r in reply[1:]])
    canceled: list[str] = []
    running: list[str] = []
    for job_id in left:
        (canceled if cancel(job_id, connection=connection).ok else running).append(job_id)
    if canceled:
        with connection.pipeline() as pipe:
            pipe.sadd(keys.batch_key(batch_id, "canceled"), *canceled)
            pipe.expire(keys.batch_key(batch_id, "canceled"), int(connection.hget(batch_keys[0], "ttl") or 86400))
            pipe.execute()
    result = BatchCanceled(outcome, tuple(canceled), tuple(running))
    if request is not None and outcome != "gone":
        detail = (
            f"batch {batch_id}: {len(canceled)} members canceled, {len(running)} running left to finish"
            if result.ok
            else f"batch {batch_id} not canceled: it has {outcome}"
        )
        audit.record(
            request,
            "cancel_batch",
            "",
            [batch_id, *canceled],
            "ok" if result.ok else "error",
            f"{reason}: {detail}" if reason else detail,
        )
    return result
