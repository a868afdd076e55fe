"""The table of operator actions and ``perform``, the one entry point every door calls.

The panel (queues/board/), the Django admin (queues/admin/) and the JSON API (``features/api.py``, through
``queues.perform``) each show their own confirmation page and speak their own words, but what an action
*is* is decided here, once:

- **permission**: the action's ``permission`` (``ACTIONS``), asked of the actor: the panel's access of the
  request when it went through the panel's guard (``request.queue_access``), else the Django user's
  ``has_perm``. The API's cancel of a caller's own job passes ``owner=True`` (the door checked the owner:
  owners may cancel their jobs without the panel's permission). An actor given as a plain identity string is
  code running in the app (a command, a test) and is not asked. Refused: every target ``refused``, audited
  (nothing is done without its row), and the door answers 403 / its message.
- **confirmation**: an action that cannot be undone (``final``) is done only with ``confirmed=True``: the
  door's confirmation page was answered (the panel's and the admin's POST from it; a ``DELETE`` of the API,
  whose method says what it does). And whatever the action, a GET or HEAD request never acts.
- **audit**: one row per target (``audit.record``): the action's ``audit`` name, the target's queue and
  ids, ``ok`` / ``error`` / ``partial`` (``results.py``), the detail prefixed by the door's ``reason``. A
  door acting on a whole selection at once (the panel's "all N jobs in this state", a failure group) asks
  for one row for the lot (``audit_as``). A change whose row cannot be written is undone when it can be
  (pause, resume) and the error raised.
- **the answer** (``Outcome``): per target, ``done`` / ``refused: <why>`` / ``changed meanwhile: <state>``.

| action            | acts on     | permission                | final | audit row         |
|-------------------|-------------|---------------------------|-------|-------------------|
| delete            | job         | queues.act_on_queue_panel | yes   | delete            |
| requeue           | job         | queues.act_on_queue_panel | no    | requeue           |
| enqueue           | job         | queues.act_on_queue_panel | no    | enqueue           |
| stop              | job         | queues.act_on_queue_panel | yes   | stop              |
| cancel            | job         | queues.act_on_queue_panel | yes   | cancel            |
| retry             | dead letter | queues.act_on_deadletter  | no    | retry             |
| discard           | dead letter | queues.act_on_deadletter  | yes   | discard           |
| cancel_retry      | dead letter | queues.act_on_deadletter  | yes   | cancel            |
| pause             | queue       | queues.act_on_queue_panel | no    | pause             |
| resume            | queue       | queues.act_on_queue_panel | no    | resume            |
| cancel_batch      | batch       | queues.act_on_queue_panel | yes   | cancel_batch      |
| empty             | queue       | queues.act_on_queue_panel | yes   | empty             |
| delete_all_failed | queue       | queues.act_on_queue_panel | yes   | delete_all_failed |
| requeue_all       | queue       | queues.act_on_queue_panel | no    | requeue_all       |
| pause_key         | limit key   | queues.act_on_queue_panel | no    | pause_key         |
| resume_key        | limit key   | queues.act_on_queue_panel | no    | resume_key        |

The queue-wide actions (``QUEUE_WIDE``: "Empty" a queue, "Delete All" and "Requeue All" of its failed jobs,
``queues_wide.py``) take queue names: one Lua call or a walk of 200,000 failed ids in chunks, one audit row
per queue for the lot (its first ids, its counts), the same from the panel's buttons as from
``queues.perform(actor, "empty", ["default"], confirmed=True)``.

Jobs named by id (``delete``, ``requeue``) are read and acted on a chunk at a time (``jobs.run_many``): the
panel's "select all N across pages" costs a few round trips per chunk of ids, not per job, and a job that
changed between the read and the write is done again on its own, answered "changed meanwhile" if it must.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from queues import audit
from queues.operator import deadletters, jobs, limit_keys, others, queues_wide
from queues.operator.results import Outcome, Result, refused
from queues.permissions import ACT_ON_QUEUE_PANEL

ACT_ON_DEADLETTER = "queues.act_on_deadletter"
SAFE_METHODS = ("GET", "HEAD")


@dataclass(frozen=True)
class Action:
    name: str
    acts_on: str  # "job", "dead letter", "queue", "batch"
    permission: str
    final: bool  # cannot be undone: done only once confirmed
    audit: str  # the audit row's action
    verb: str  # what a door says was done ("deleted")


ACTIONS = {
    a.name: a
    for a in (
        Action("delete", "job", ACT_ON_QUEUE_PANEL, True, "delete", "deleted"),
        Action("requeue", "job", ACT_ON_QUEUE_PANEL, False, "requeue", "requeued"),
        Action("enqueue", "job", ACT_ON_QUEUE_PANEL, False, "enqueue", "enqueued"),
        Action("stop", "job", ACT_ON_QUEUE_PANEL, True, "stop", "stopped"),
        Action("cancel", "job", ACT_ON_QUEUE_PANEL, True, "cancel", "canceled"),
        Action("retry", "dead letter", ACT_ON_DEADLETTER, False, "retry", "retried"),
        Action("discard", "dead letter", ACT_ON_DEADLETTER, True, "discard", "discarded"),
        Action("cancel_retry", "dead letter", ACT_ON_DEADLETTER, True, "cancel", "canceled (their retry)"),
        Action("pause", "queue", ACT_ON_QUEUE_PANEL, False, "pause", "paused"),
        Action("resume", "queue", ACT_ON_QUEUE_PANEL, False, "resume", "resumed"),
        Action("cancel_batch", "batch", ACT_ON_QUEUE_PANEL, True, "cancel_batch", "canceled"),
        Action("empty", "queue", ACT_ON_QUEUE_PANEL, True, "empty", "emptied"),
        Action("delete_all_failed", "queue", ACT_ON_QUEUE_PANEL, True, "delete_all_failed", "deleted"),
        Action("requeue_all", "queue", ACT_ON_QUEUE_PANEL, False, "requeue_all", "requeued"),
        Action("pause_key", "limit key", ACT_ON_QUEUE_PANEL, False, "pause_key", "paused"),
        Action("resume_key", "limit key", ACT_ON_QUEUE_PANEL, False, "resume_key", "resumed"),
    )
}
QUEUE_WIDE = {name: ACTIONS[name] for name in ("empty", "delete_all_failed", "requeue_all")}  # queues_wide.py
TOGGLES = ("pause", "resume")  # others.py


class UnknownAction(ValueError):
    pass


def action_named(name: str) -> Action:
    found = ACTIONS.get(name)
    if found is None:
        known = ", ".join(sorted(ACTIONS))
        raise UnknownAction(f"action={name!r} is no operator action: use one of {known}.")
    return found


def permitted(actor: Any, action: Action, owner: bool = False) -> bool:
    """Whether ``actor`` may do ``action`` (see the module's docstring)."""
    if isinstance(actor, str) or (owner and action.name == "cancel"):
        return True
    access = getattr(actor, "queue_access", None)
    if access is not None and action.permission == ACT_ON_QUEUE_PANEL:
        return bool(access.can_act)
    user = getattr(actor, "user", actor)
    if not getattr(user, "is_active", False):
        return False
    return bool(user.has_perm(action.permission))


def check(actor: Any, name: str, *, confirmed: bool = False, owner: bool = False) -> str:
    """Why ``actor`` may not do ``name`` now, or "": no permission, an unconfirmed final action, a GET."""
    action = action_named(name)
    if getattr(actor, "method", None) in SAFE_METHODS:
        return f"{action.name} is done by a POST from its confirmation page, never by a {actor.method}"
    if not permitted(actor, action, owner):
        return f"{_who(actor)} may not {action.name.replace('_', ' ')}: it needs the permission {action.permission}"
    if action.final and not confirmed:
        return f"{action.name.replace('_', ' ')} cannot be undone: it is done only once confirmed"
    return ""


def _who(actor):
    return audit.identity_of(actor)[0]


def perform(
    actor: Any,
    name: str,
    targets: Iterable[Any],
    *,
    confirmed: bool = False,
    owner: bool = False,
    queue: Any = None,
    reason: str = "",
    audit_as: Callable[[Outcome], tuple[str, list[str], str, str] | None] | None = None,
    **options: Any,
) -> Outcome:
    """Do ``name`` to each of ``targets`` as ``actor`` (an HttpRequest, preferably: the audit trail's who);
    -> ``Outcome``. Targets: job ids (with ``queue``, the rq queue they are in; a cancel finds its job's
    queue itself), dead letters as ``(pk, queue, job_id)``, queue names, batch ids, limit keys as
    ``"<queue>:<limit key>"``. ``reason`` prefixes each
    audit row's detail (where the action came from). ``audit_as(outcome) -> (queue, job_ids, outcome,
    detail)``: one row for the lot instead of one per target. ``options`` go to the dead-letter operation
    (``accept_unverified``)."""
    action = action_named(name)
    targets = list(targets)
    why = check(actor, name, confirmed=confirmed, owner=owner)
    if why:
        results = [refused(_target_id(action, t), why, queue=_queue_of(action, t, queue)) for t in targets]
    else:
        try:
            results = _run(action, targets, queue, options)
        except Exception as exc:
            for target in targets:  # nothing without its row, a failure neither
                audit.record(
                    actor, action.audit, _queue_of(action, target, queue), [_target_id(action, target)],
                    "error", f"{type(exc).__name__}: {exc}",
                )  # fmt: skip
            raise
    outcome = Outcome(action.name, results)
    _audit(actor, action, outcome, reason, audit_as)
    return outcome


def _run(action, targets, queue, options):
    if action.acts_on == "job":
        if action.name == "cancel" and queue is None:
            return [jobs.run(action.name, _NoQueue(), t) for t in targets]
        if action.name in ("delete", "requeue"):  # a chunk of ids in a few round trips
            results, failed = jobs.run_many(action.name, queue, targets)
            jobs.mark_rows_of(action.name, [r.target for r in results if r.ok and r.target in failed])
            return results
        failed = set(jobs.failed_ids(queue, targets)) if action.name == "enqueue" else set()
        results = [jobs.run(action.name, queue, t, t in failed) for t in targets]
        jobs.mark_rows_of(action.name, [r.target for r in results if r.ok and r.target in failed])
        return results
    if action.acts_on == "dead letter":
        return [deadletters.run(action.name, t, **options) for t in targets]
    if action.acts_on == "queue" and action.name not in TOGGLES:
        return [queues_wide.run(action.name, t, queue) for t in targets]
    if action.acts_on == "queue":
        return [others.toggle(action.name, t, getattr(queue, "connection", None)) for t in targets]
    if action.acts_on == "limit key":  # targets "<queue>:<limit key>" (limit_keys.py)
        return [limit_keys.toggle(action.name, t, getattr(queue, "connection", None)) for t in targets]
    return [others.cancel_one_batch(t) for t in targets]


class _NoQueue:
    """A cancel named by job id alone (the API): ``queues.cancel`` finds the job's queue."""

    name = ""
    connection = None


def _target_id(action, target):
    return str(target[2]) if action.acts_on == "dead letter" else str(target)


def _queue_of(action, target, queue):
    if action.acts_on == "dead letter":
        return target[1]
    if action.acts_on == "queue":
        return target
    if action.acts_on == "limit key":
        return str(target).partition(":")[0]
    return getattr(queue, "name", "") or ""


def _audit(actor, action, outcome: Outcome, reason, audit_as):
    if audit_as is not None:
        row = audit_as(outcome)
        if row is not None:  # None: the door writes its own row (a failure group's)
            queue, ids, result, detail = row
            audit.record(actor, action.audit, queue, ids, result, detail)
        return
    for result in outcome.results:
        detail = f"{reason}: {result.detail}" if reason else result.detail
        try:
            audit.record(actor, action.audit, result.queue, result.audited_ids, result.audit_outcome, detail)
        except DatabaseError:
            if result.undo is not None:  # no change without its audit row: put it back
                result.undo()
            raise


def counted(outcome: Outcome) -> str:
    """ "3 requeued, 1 changed meanwhile, 0 refused": the lot's answer in one line."""
    verb = action_named(outcome.action).verb
    changed = sum(1 for r in outcome.results if r.kind == "changed")
    return f"{len(outcome.done)} {verb}, {changed} changed meanwhile, {len(outcome.not_done) - changed} refused"


def one(actor: Any, name: str, target: Any, **kwargs: Any) -> Result:
    """``perform`` on one target: its Result."""
    return perform(actor, name, [target], **kwargs).first()
