"""What an action did to one object (``Result``) and to all of them (``Outcome``): the answer every door
turns into its own words (a message, an admin message, an HTTP status).

Three answers, the same at every door:

- ``done``;
- ``refused: <why>`` — the action may not, or cannot, be done to it (no permission, no confirmation, a
  corrupt job, a Redis error, a dead letter never verified left to its own page);
- ``changed meanwhile: <state now>`` — the object is not (or no longer) in the state the action needs:
  requeue of a job no longer failed, stop of one no worker runs, cancel of one already started, retry of
  a dead letter already retried, an object gone. Nothing was changed.

Audit outcome of each: ``ok``, ``error``, ``error`` (nothing was done: the row's detail says why), at every
door (the admin's skipped dead letters were ``partial`` before, the panel's and the API's ``error``). A dead
letter never verified, left to its own page by a bulk retry, stays ``partial`` (refused, not failed).
"""

from collections.abc import Callable
from dataclasses import dataclass, field

DONE = "done"
REFUSED = "refused"
CHANGED = "changed"

AUDIT_OUTCOME = {DONE: "ok", REFUSED: "error", CHANGED: "error"}
# The admin's tally counts ok / skipped / error (queues.admin.base.Tally).
TALLY = {DONE: "ok", REFUSED: "error", CHANGED: "skipped"}


@dataclass(frozen=True)
class Result:
    """One object's answer. ``target``: the id the door named (job id, dead letter's job id, queue name, batch
    id). ``detail``: what happened, in the operator's words. ``state``: the object's state now when it had
    changed. ``queue``: the queue its audit row names. ``job_ids``: the ids its audit row lists (default: the
    target). ``new_job``: the job that now runs when it is a new one (a dead letter retried from its row)."""

    target: str
    kind: str
    detail: str
    state: str = ""
    queue: str = ""
    job_ids: tuple | None = None  # None: the target; (): none (a queue paused names no job)
    new_job: str = ""
    unverified: bool = False  # refused: a dead letter never verified, left to a one-row retry on its page
    data: dict = field(default_factory=dict, compare=False)  # what a door shows beyond the detail (counts)
    undo: Callable[[], object] | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.kind == DONE

    @property
    def outcome(self) -> str:
        """The admin tally's word: ok, skipped or error."""
        if self.unverified:
            return "skipped"
        return TALLY[self.kind]

    @property
    def audit_outcome(self) -> str:
        return "partial" if self.unverified else AUDIT_OUTCOME[self.kind]

    @property
    def audited_ids(self) -> list[str]:
        return [str(i) for i in (self.job_ids if self.job_ids is not None else (self.target,))]

    def __str__(self) -> str:
        if self.kind == DONE:
            return "done"
        if self.kind == CHANGED:
            return f"changed meanwhile: {self.state or 'unknown'}"
        return f"refused: {self.detail}"


def done(target, detail, **kwargs) -> Result:
    return Result(str(target), DONE, detail, **kwargs)


def refused(target, detail, **kwargs) -> Result:
    return Result(str(target), REFUSED, detail, **kwargs)


def changed(target, state, detail, **kwargs) -> Result:
    return Result(str(target), CHANGED, detail, state=state, **kwargs)


@dataclass
class Outcome:
    """``perform``'s answer: the action's name and each target's ``Result``, in the order given."""

    action: str
    results: list[Result] = field(default_factory=list)

    @property
    def done(self) -> list[Result]:
        return [r for r in self.results if r.kind == DONE]

    @property
    def not_done(self) -> list[Result]:
        return [r for r in self.results if r.kind != DONE]

    @property
    def ok(self) -> bool:
        return bool(self.results) and not self.not_done

    def first(self) -> Result:
        return self.results[0]
