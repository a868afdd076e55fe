"""``queues.batch_state(id)``: a batch as its keys say, one round trip."""

import datetime as dt
import json
from dataclasses import dataclass, field

from queues.connection.clients import get_connection
from queues.keyspace import keys
from queues.workflows.batches import KINDS, SETS

STATES = ("open", "running", "succeeded", "completed_with_dead", "canceled")


@dataclass(frozen=True)
class BatchState:
    """A batch: ``state`` (one of ``STATES``), its counts, times (aware UTC; ``finished_at`` None until it
    ends), ``callbacks`` {``on_success``/``on_complete``/``on_death``: job id} and ``fired`` {same: when it
    was pushed, ``never`` or ``canceled``; missing while it waits}."""

    id: str
    state: str
    total: int
    pending: int
    finished: int
    dead: int
    canceled: int
    created_at: dt.datetime | None
    finished_at: dt.datetime | None
    description: str = ""
    owner: object = None
    callbacks: dict[str, str] = field(default_factory=dict)
    fired: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        """JSON-able: what ``GET /batches/<id>/`` answers."""
        return {
            "id": self.id,
            "state": self.state,
            "total": self.total,
            "pending": self.pending,
            "finished": self.finished,
            "dead": self.dead,
            "canceled": self.canceled,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "description": self.description,
            "callbacks": dict(self.callbacks),
            "fired": dict(self.fired),
        }


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _time(value: object) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(float(_text(value)), dt.UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _owner(stored: str | None) -> object:
    """The owner ``queues.batch(meta=queues.owner_meta(key))`` was given (JSON: a user id stays an int)."""
    try:
        return json.loads(stored) if stored else None
    except ValueError:
        return None


def from_hash(
    batch_id: str, found: dict[bytes, bytes] | dict[str, str], counts: tuple[int, int, int, int]
) -> tuple[BatchState, dict[str, str]]:
    """(``BatchState``, the hash's fields as text) from a batch's hash and the sizes of its members, done,
    dead and canceled sets: how ``batch_state`` and the panel's Batches pages (``queues/board/batches.py``)
    read one batch."""
    fields = {_text(k): _text(v) for k, v in found.items()}
    members, done, dead, canceled = counts
    state = fields.get("state", "")
    if "total" in fields:  # succeeded: the counts frozen in the hash, the sets dropped (scripts.py)
        members, done, dead = (_int(fields.get(name)) for name in ("total", "finished", "dead"))
    counted = done + dead + (canceled if state == "canceled" else 0)
    batch = BatchState(
        id=batch_id,
        state=state if state in STATES else "unknown",
        total=members,
        pending=max(members - counted, 0),
        finished=done,
        dead=dead,
        canceled=canceled,
        created_at=_time(fields.get("created_at")),
        finished_at=_time(fields.get("finished_at")),
        description=fields.get("description", ""),
        owner=_owner(fields.get("owner")),
        callbacks={f"on_{kind}": fields[f"cb_{kind}"] for kind in KINDS if f"cb_{kind}" in fields},
        fired={f"on_{kind}": fields[f"fired_{kind}"] for kind in KINDS if f"fired_{kind}" in fields},
    )
    return batch, fields


def batch_state(batch_id: str) -> BatchState | None:
    """The batch ``batch_id``, or None for an unknown (or expired) id."""
    if not isinstance(batch_id, str) or not batch_id or len(batch_id) > 200:
        return None
    with get_connection().pipeline(transaction=False) as pipe:
        pipe.hgetall(keys.batch_key(batch_id))
        for part in SETS:
            pipe.scard(keys.batch_key(batch_id, part))
        found, members, done, dead, _adders, canceled = pipe.execute()
    if not found:
        return None
    return from_hash(batch_id, found, (members, done, dead, canceled))[0]
