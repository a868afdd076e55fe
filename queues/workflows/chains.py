"""Chains and groups (issue 34, section 2): ``queues.chain(step, step, ...)``, ``queues.group(call, ...)``.

A chain runs each step after the one before it succeeded. Every step is a batch (``batches.py``): a call is
a batch of one member, a group a batch of its calls (the chord of other systems). The batch's
``on_success`` is the chain's own job, ``queues.workflows.steps.advance`` (a job module of the app:
``queues/apps.py``), on the next step's queue: it opens the next step's batch, handing the previous
step's return value as the keyword ``previous`` when ``pass_result=True`` (a group's: the list of its
calls' values, in their order). So a chain inherits the batch's guarantees: a step's success is counted
once and its ``advance`` pushed once; ``advance`` itself runs at least once and moves on once: the next step's
batch and jobs have ids derived from the chain's (``step_id``), made before the mark ``advanced_<i>``, so a run
killed halfway is completed by its re-run, which finds what was made and makes only the rest.

A dead step stops the chain: its batch is ``completed_with_dead`` and its ``on_success`` waits. The
steps after it wait on the dead job(s) (``chain_state``). Retried by an operator and succeeded, the
batch succeeds and the chain goes on; discarded, the chain is canceled (``hook.py``, ``after_discard``).

The hash ``<p>:optima:chain:<id>``: ``spec`` (JSON: the steps, each ``{"group": bool, "calls": [[queue,
func, args, kwargs], ...]}``), ``pass_result``, ``state`` (``running``, ``succeeded``, ``canceled``),
``step`` (the index running), ``batch_<i>`` and ``jobs_<i>`` (the step's batch and job ids), ``owner``,
``description``, times; under ``queues.testing.inline()`` with ``pass_result``, ``results_<i>`` (the step's values:
its jobs are in no hash). It expires with the retention of the last step's queue once the chain ended, and
with its dead letters' while it is stopped at a dead step (``scripts.py``, ``keep_while_dead``).
"""

import json
import time
from dataclasses import dataclass, field
from typing import Any

from queues import conf, rqcompat, testing
from queues.catalog.lookup import declared, fetch_job, get_config
from queues.connection.clients import get_connection
from queues.exceptions import InvalidJob
from queues.jobs import meta as jobmeta
from queues.keyspace import keys
from queues.producer import api, joining
from queues.workflows.batches import Batch, Step, call

ADVANCE = "queues.workflows.steps.advance"


@dataclass(frozen=True)
class Group:
    """``queues.group(call, call, ...)``: a chain's step whose calls run side by side (a batch)."""

    steps: tuple[Step, ...]


def group(*calls: Step) -> Group:
    """A step of ``queues.chain`` made of several ``queues.call``s run side by side; the chain goes on when
    every one of them succeeded."""
    if not calls:
        raise InvalidJob("queues.group() needs at least one queues.call(...).")
    for i, item in enumerate(calls):
        if not isinstance(item, Step):
            raise InvalidJob(
                f"queues.group() argument {i} must be queues.call(queue, 'dotted.path', ...), got "
                f"{type(item).__name__} {item!r:.120}."
            )
    return Group(tuple(calls))


@dataclass(frozen=True)
class Chain:
    """What ``queues.chain`` returns: ``id`` (``queues.chain_state(id)``) and ``batch_id``, the first step's batch."""

    id: str
    batch_id: str


def chain(
    *steps: Step | Group,
    pass_result: bool = False,
    description: str = "",
    meta: dict[str, Any] | None = None,
) -> Chain:
    """Run ``steps`` one after the other, each once the one before it succeeded; a step is a
    ``queues.call(...)`` or a ``queues.group(...)``. ``pass_result=True``: each step after the first gets the
    previous one's return value as the keyword ``previous`` (a list for a group). ``meta``:
    ``queues.owner_meta(key)``, as for ``queues.batch``. The first step is enqueued now."""
    if not steps:
        raise InvalidJob("queues.chain() needs at least one step: queues.call(...) or queues.group(...).")
    spec: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        if isinstance(step, Step):
            spec.append({"group": False, "calls": [_stored(step)]})
        elif isinstance(step, Group):
            spec.append({"group": True, "calls": [_stored(s) for s in step.steps]})
        else:
            raise InvalidJob(
                f"queues.chain() step {i} must be queues.call(...) or queues.group(...), got "
                f"{type(step).__name__} {step!r:.120}."
            )
    for name in sorted({stored[0] for step_spec in spec for stored in step_spec["calls"]}):
        if name in declared():  # each step is a batch: queues of the default server only (an undeclared one
            joining.check_member(name, declared()[name].server)  # is refused where its step is enqueued)
    if pass_result is not True and pass_result is not False:
        raise InvalidJob(f"pass_result must be True or False, got {pass_result!r}.")
    if meta is not None and (not isinstance(meta, dict) or set(meta) - {jobmeta.OWNER}):
        raise InvalidJob(f"meta of a chain may only be queues.owner_meta(owner_key), got {meta!r:.120}.")
    owner = jobmeta.owner(meta) if meta else None
    chain_id = api._new_job_id()
    last_queue = spec[-1]["calls"][0][0]
    get_connection().hset(
        keys.chain_key(chain_id),
        mapping={
            "spec": json.dumps(spec),
            "pass_result": "1" if pass_result else "",
            "state": "running",
            "created_at": f"{time.time():.6f}",
            "description": description,
            "owner": "" if owner is None else json.dumps(owner),
            "ttl": max(int(get_config(last_queue).options["result_ttl"]), 60),
        },
    )
    return Chain(chain_id, _run_step(chain_id, spec, 0, None, pass_result, owner))


def _stored(step: Step) -> list[Any]:
    return [step.queue, step.func, list(step.args), dict(step.kwargs)]


def _run_step(
    chain_id: str, spec: list[dict[str, Any]], index: int, previous: Any, pass_result: bool, owner: Any
) -> str:
    """Open step ``index``'s batch, its ``on_success`` the chain's ``advance``; -> the batch's id."""
    following = spec[index + 1] if index + 1 < len(spec) else spec[index]
    advance = call(following["calls"][0][0], ADVANCE, chain_id, index)
    key = keys.chain_key(chain_id)
    connection = get_connection()
    with Batch(
        {"success": advance},
        f"step {index + 1} of {len(spec)} of chain {chain_id}",
        owner,
        step_id(chain_id, index),
        chain=chain_id,
        step=str(index),
        chain_key=key,  # a batch completed with dead members gives the chain's hash its expiry (scripts.py)
    ) as batch:
        ids, results = [], []
        # Reopened and sealed: the killed run had enqueued every call (a finished one's hash may be gone already).
        made = batch.reopened and not connection.sismember(keys.batch_key(batch.id, "adders"), "block")
        for j, (queue, func, args, kwargs) in enumerate(spec[index]["calls"]):
            if pass_result and index > 0:
                kwargs = {**kwargs, "previous": previous}
            job_id = step_id(chain_id, index, j)
            if made or (batch.reopened and connection.exists(keys.job_key(job_id))):
                batch.joined([job_id])  # enqueued by the run of ``advance`` that was killed: not twice
            else:
                job = api.enqueue_call(queue, func, args, kwargs, job_id=job_id)
                if testing.inline_on():  # it ran now, and is in no hash: ``advance`` reads its value from the chain
                    results.append(rqcompat.cached_result(job))
            ids.append(job_id)
        # Inside the block: the batch cannot complete (nor ``advance`` read these) before its seal.
        mapping: dict[Any, Any] = {"step": index, f"batch_{index}": batch.id, f"jobs_{index}": json.dumps(ids)}
        if testing.inline_on() and pass_result:
            mapping[f"results_{index}"] = json.dumps(results)
        connection.hset(key, mapping=mapping)
    return batch.id


def step_id(chain_id: str, index: int, call: int | None = None) -> str:
    """The batch id of step ``index`` of a chain, or with ``call`` the job id of its call: derived, so that a
    run of ``advance`` killed halfway finds, on its re-run, what it made (and makes only the rest)."""
    return f"{chain_id}-{index}" if call is None else f"{chain_id}-{index}-{call}"


def advance(chain_id: str, index: int, batch_id: str) -> str:
    """Step ``index`` succeeded (its batch ``batch_id``): run the next one, or end the chain; once per step.
    -> what was done: ``next``, ``succeeded``, or why nothing was (``gone``, ``done already``, ``canceled``)."""
    connection = get_connection()
    key = keys.chain_key(chain_id)
    if not connection.exists(key):
        return "gone"
    fields = {_text(k): _text(v) for k, v in connection.hgetall(key).items()}
    if fields.get(f"advanced_{index}"):
        return "done already"  # this step's advance ran already (it runs at least once)
    if fields.get("state") != "running":
        return fields.get("state") or "gone"
    spec = json.loads(fields["spec"])
    if index + 1 >= len(spec):
        with connection.pipeline() as pipe:
            pipe.hset(key, mapping={"state": "succeeded", "finished_at": f"{time.time():.6f}"})
            pipe.hsetnx(key, f"advanced_{index}", f"{time.time():.6f}")
            pipe.expire(key, int(fields.get("ttl") or conf.job_defaults()["result_ttl"]))
            pipe.execute()
        return "succeeded"
    previous = None
    pass_result = bool(fields.get("pass_result"))
    if pass_result:
        inline_results = fields.get(f"results_{index}")  # the step ran under ``queues.testing.inline()``
        results = (
            json.loads(inline_results)
            if inline_results
            else [_result(job_id) for job_id in json.loads(fields[f"jobs_{index}"])]
        )
        previous = results if spec[index]["group"] else results[0]
    # The next step first, then the mark: a worker killed in between leaves the mark unset, and the re-run of this
    # job (at least once) finds the next step's batch and jobs by their derived ids and makes only what is missing.
    connection.persist(key)  # stopped at a dead step, it had the dead letters' retention: it goes on now
    _run_step(chain_id, spec, index + 1, previous, pass_result, _owner(fields.get("owner")))
    connection.hsetnx(key, f"advanced_{index}", f"{time.time():.6f}")
    return "next"


def cancel_after_discard(connection: Any, chain_id: str) -> None:
    """A dead step's job was discarded: the chain will not go on."""
    key = keys.chain_key(chain_id)
    if connection.hget(key, "state") == b"running":
        with connection.pipeline() as pipe:
            pipe.hset(key, mapping={"state": "canceled", "finished_at": f"{time.time():.6f}"})
            pipe.expire(key, int(connection.hget(key, "ttl") or conf.job_defaults()["result_ttl"]))
            pipe.execute()


def _result(job_id: str) -> Any:
    job = fetch_job(job_id)
    return None if job is None else job.return_value()


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _owner(stored: bytes | str | None) -> Any:
    try:
        return json.loads(stored) if stored else None
    except ValueError:
        return None


@dataclass(frozen=True)
class StepState:
    """One step of a chain: ``state`` (``succeeded``, the state of its batch while it runs, ``waiting``,
    ``canceled``), its ``batch_id`` and ``job_ids`` once it started, and ``waiting_on``: for a step that
    waits, the job ids it waits on (the dead ones of a stopped chain)."""

    index: int
    state: str
    calls: list[str]
    batch_id: str | None = None
    job_ids: list[str] = field(default_factory=list)
    waiting_on: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ChainState:
    """``queues.chain_state(id)``: ``state`` (``running``, ``stopped``: a step is dead and waits for an
    operator, ``succeeded``, ``canceled``), ``step`` (the index running or stopped) and ``steps``."""

    id: str
    state: str
    step: int
    steps: list[StepState]
    description: str = ""
    owner: object = None


def chain_state(chain_id: str) -> ChainState | None:
    """The chain ``chain_id``, or None for an unknown (or expired) id: two round trips (its hash, then its
    current step's batch state and dead set in one pipeline)."""
    if not isinstance(chain_id, str) or not chain_id or len(chain_id) > 200:
        return None
    connection = get_connection()
    found = connection.hgetall(keys.chain_key(chain_id))
    if not found:
        return None
    fields = chain_fields(found)
    batch_id = current_batch(fields)
    batch_state, dead = "", []
    if batch_id:
        with connection.pipeline(transaction=False) as pipe:
            pipe.hget(keys.batch_key(batch_id), "state")
            pipe.smembers(keys.batch_key(batch_id, "dead"))
            state_, dead_ = pipe.execute()
        batch_state, dead = _text(state_ or b""), [_text(j) for j in dead_]
    return chain_from_fields(chain_id, fields, batch_state, dead)


def chain_fields(found: dict[Any, Any]) -> dict[str, str]:
    """A chain hash's fields as text (``HGETALL``'s reply)."""
    return {_text(k): _text(v) for k, v in found.items()}


def current_batch(fields: dict[str, str]) -> str | None:
    """The batch id of the step the chain runs (or stopped at), None before it opened one."""
    return fields.get(f"batch_{int(fields.get('step') or 0)}") or None


def step_jobs(fields: dict[str, str]) -> list[list[str]]:
    """The job ids of each step that started (``jobs_<i>``), in the order of the steps, as the hash holds
    them: what a reader wants to look up before it builds the ``ChainState`` (the panel, in one pipeline)."""
    spec = json.loads(fields.get("spec") or "[]")
    return [json.loads(fields.get(f"jobs_{i}") or "[]") for i in range(len(spec))]


def chain_from_fields(chain_id: str, fields: dict[str, str], batch_state: str, dead: list[str]) -> ChainState:
    """The ``ChainState`` of the hash's ``fields``, with its current step's batch ``state`` field and the ids in
    its ``dead`` set (empty without a batch): the pure half of ``chain_state``, so that a reader holding its own
    client (the panel's bounded one) reads the same keys in its own round trips."""
    spec = json.loads(fields.get("spec") or "[]")
    current = int(fields.get("step") or 0)
    state = fields.get("state", "")
    batch_id = fields.get(f"batch_{current}")
    dead = sorted(dead) if batch_id else []
    if state == "running" and batch_state == "completed_with_dead":
        state = "stopped"
    current_jobs = json.loads(fields.get(f"jobs_{current}") or "[]")
    steps = []
    for i, step in enumerate(spec):
        calls = [c[1] for c in step["calls"]]
        jobs = json.loads(fields.get(f"jobs_{i}") or "[]")
        if i < current or (i == current and fields.get(f"advanced_{i}")):
            steps.append(StepState(i, "succeeded", calls, fields.get(f"batch_{i}"), jobs))
        elif i == current:
            steps.append(StepState(i, batch_state or "open", calls, batch_id, jobs, dead))
        else:
            later = "canceled" if state == "canceled" else "waiting"
            steps.append(StepState(i, later, calls, waiting_on=[] if later == "canceled" else dead or current_jobs))
    return ChainState(chain_id, state, current, steps, fields.get("description", ""), _owner(fields.get("owner")))
