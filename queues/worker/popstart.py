"""A pop that starts the job it pops, in the same Lua call (issue 36): the workers that run their jobs themselves.

A job costs a worker two calls of its own before it runs: the pop (``popscript.POP_LUA``: the id moved into the
queue's intermediate list, the hash read back) and the start (``attempt.begin``: the started entry, the id out
of the intermediate list, the job STARTED). The intermediate list only bridges the gap between the two. Here the
pop writes the start itself for a job whose hash says it may run (``RUNS``, or put back by one of the app's
paths): the id goes from its queue straight into the started registry, atomically, as the start's MULTI took it
there from the intermediate list. Three commands a job fewer (the LMOVE's twin check, LPOS, and the start's
script call and LREM) and a round trip: the fork-free worker's start, the concurrent worker's main thread's.

What the worker still decides after the pop keeps its shape: a popped job that is not to run after all (the gate
refuses it, a stop asked for, the teardown of a job popped ahead) is first *unstarted* (``unstart``: its started
entry gone, its hash's start fields as they were, its id in the intermediate list), and then goes the way a job
popped into the intermediate list always went (refused, dropped, given back to the head of its queue). A job
whose hash the pop does not trust to run (another status, another queue's origin, no hash, a started registry
of the wrong type) is popped as before, into the intermediate list, and vetted and started as before.

The concurrent and async workers pop several jobs at once for their free slots: the pop starts each, and the main
thread hands each to its thread with its start written (``concurrent.OptimaConcurrentWorker.execute_job``); the
jobs it could not start wait in the intermediate list and are started together as before
(``attempt.begin_together``). The forking worker does not (``WorkerBehaviour.starts_with_pop``): its horse
writes its side of the start.
"""

import weakref

from rq.job import JobStatus
from rq.utils import now, utcformat
from rq.worker.base import WorkerStatus

from queues import rqcompat
from queues.jobs import execution as execution_record
from queues.jobs import gate
from queues.jobs.execution import Execution
from queues.keyspace import keys
from queues.worker.abandoned import give_back

# Written by ``Plan.argv`` and read by ``popscript.POP_LUA``: the start's arguments after the pop's own, in this
# order; then one execution id for each job the call may pop.
START_FIELDS = (
    "worker",  # the worker's name (the job's worker_name; the records' worker)
    "at",  # the start as rq writes it in the job's hash (utcformat): started_at and last_heartbeat
    "now",  # the start in whole unix seconds: the started entry's score is it plus the heartbeat ttl
    "created",  # the start in unix seconds (rq's records: created_at, last_heartbeat)
    "default_ttl",  # rq's SimpleWorker.get_heartbeat_ttl: DEFAULT_WORKER_TTL for a job without a timeout
    "extra",  # STARTED_ENTRY_TTL_SECONDS (adapter.WorkerBehaviour.get_heartbeat_ttl)
    "records",  # "1" when rq's execution hash and the worker's set of executions are written
    "execution_prefix",  # rq's execution hash key, less "<job id>:<execution id>"
    "worker_executions",  # the worker's set of executions
    "busy",  # the worker's hash when the start also writes the worker BUSY, else ""
    "runs",  # the statuses a popped job runs in (gate.RUNS), comma-separated
    "executions_until",  # the unix second the worker's set of executions lives until, as far as it knows (or 0)
)
# rq's records (``records``): the worker's set of executions was given an EXPIRE with every start, the start's own
# ttl + 60 s: a command a job. The pop now expires it only when a job's start needs it to live longer than the
# worker last made it live, and then for this many seconds more than that start needs: one EXPIRE every few
# minutes in a drain of like jobs (issue 36). The set outlives its last entry by at most as much. The worker forgets
# what it made after an outage (Redis may have lost the set, and an SADD makes it again without an expiry).
EXECUTIONS_SLACK_SECONDS = 300

# KEYS: the job's started registry, its hash, its queue's intermediate list, its rq execution hash, the worker's
# set of executions. ARGV: the started entry, the execution id, the job id, then (name, "1" or "0", value) of each
# field the start wrote, as it was before it: there ("1", its value) or not ("0"). The start taken back: its
# started entry and records gone, the fields as they were (while the hash still names this execution), the id into
# the intermediate list, where what follows a pop (the refusal, a drop, a give back) finds a job popped and not
# started.
UNSTART_LUA = """
redis.pcall('ZREM', KEYS[1], ARGV[1])
redis.pcall('DEL', KEYS[4])
redis.pcall('SREM', KEYS[5], ARGV[1])
local named = redis.pcall('HGET', KEYS[2], '@FIELD@')
if named == ARGV[2] then
  for i = 4, #ARGV, 3 do
    if ARGV[i + 1] == '1' then
      redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
    else
      redis.call('HDEL', KEYS[2], ARGV[i])
    end
  end
end
redis.call('RPUSH', KEYS[3], ARGV[3])
return 1
""".replace("@FIELD@", execution_record.FIELD)

_DEFAULT_WORKER_TTL = 420  # rq.defaults.DEFAULT_WORKER_TTL, which rq's SimpleWorker.get_heartbeat_ttl falls back to
_START_FIELDS = ("last_heartbeat", "status", "started_at", "worker_name", execution_record.FIELD)


class Plan:
    """One pop's start: its moment and its execution ids; ``argv``, its arguments to the pop's script."""

    def __init__(self, worker, count):
        self.worker = worker
        self.ids = [execution_record.new_id() for _ in range(count)]
        self.moment = now()
        self.busy = worker.get_state() != WorkerStatus.BUSY or worker.intake.busy_lost()

    def argv(self):
        moment = self.moment
        values = {
            **_fixed(self.worker),
            "at": utcformat(moment),
            "now": str(int(moment.timestamp())),
            "created": repr(moment.timestamp()),
            "busy": self.worker.key if self.busy else "",
            "executions_until": str(_executions_until(self.worker)),
        }
        return [values[name] for name in START_FIELDS] + self.ids

    def answered(self, lives):
        """The pop's reply said until when the worker's set of executions lives (``EXECUTIONS_SLACK_SECONDS``)."""
        _EXECUTIONS_UNTIL[self.worker] = (int(lives), self.worker.outage.episodes)


# worker -> (the unix second its set of executions lives until, as its last pop said; the outage episodes then)
_EXECUTIONS_UNTIL: weakref.WeakKeyDictionary[object, tuple[int, int]] = weakref.WeakKeyDictionary()


def _executions_until(worker):
    """Until when ``worker``'s set of executions lives as far as it knows: 0 (unknown) after an outage since."""
    known = _EXECUTIONS_UNTIL.get(worker)
    if known is None or known[1] != worker.outage.episodes:
        return 0
    return known[0]


_FIXED: weakref.WeakKeyDictionary[object, dict[str, str]] = (
    weakref.WeakKeyDictionary()
)  # worker -> the arguments of its starts that are the same for every pop


def _fixed(worker):
    """The arguments of ``worker``'s starts that do not change from one pop to the next, made with its first pop
    (its options are read on first use: ``WorkerBehaviour.resilience``), not again with every pop."""
    fixed = _FIXED.get(worker)
    if fixed is None:
        fixed = _FIXED[worker] = {
            "worker": worker.name,
            "default_ttl": str(_DEFAULT_WORKER_TTL),
            "extra": str(worker.resilience.started_entry_ttl),
            "records": "1" if worker.resilience.rq_execution_records else "",
            "execution_prefix": keys.execution_key(":").removesuffix(":"),
            "worker_executions": keys.worker_executions_key(worker.name),
            "runs": ",".join(sorted(gate.RUNS)),
        }
    return fixed


def plan(worker, count):
    """The start for a pop of up to ``count`` jobs by ``worker``, or None when its pops do not start what they pop."""
    if not worker.starts_with_pop:
        return None
    return Plan(worker, count)


def adopt(worker, job, started):
    """The execution of ``job`` that its pop started (``dequeue.Popped.started``: the plan and the execution id):
    the job as the start left its hash (STARTED, its worker, start and heartbeat), the execution recorded as the
    worker's, the worker BUSY when the pop wrote it -> the Execution."""
    start_plan, execution_id = started
    moment = start_plan.moment
    job.worker_name = worker.name
    job.started_at = job.last_heartbeat = moment
    rqcompat.set_status_in_hash(job, JobStatus.STARTED)
    execution = Execution(id=execution_id, job_id=job.id, connection=job.connection, worker_name=worker.name)
    execution.created_at = execution.last_heartbeat = moment
    execution.rq_records = bool(worker.resilience.rq_execution_records)
    rqcompat.set_execution_job(execution, job)
    if start_plan.busy:
        # written by the pop: the state noted, no HSET of its own
        worker.set_state(WorkerStatus.BUSY, pipeline=_Written())
        worker.intake.busy_written = worker.outage.episodes
        start_plan.busy = False  # one pop writes it once
    worker.executions[execution.id] = execution
    return execution


def carry(job, popped):
    """``job`` carrying its pop (``dequeue.Popped``) to ``attempt.begin`` (``taken``) -> ``job``."""
    job.optima_popped = popped
    return job


def carried(job):
    """Whether ``job`` carries a pop that started it (``carry``)."""
    popped = getattr(job, "optima_popped", None)
    return popped is not None and popped.started is not None


def taken(job):
    """The pop ``job`` carries (``carry``) when that pop started it, else None; the job carries it no more."""
    popped = getattr(job, "optima_popped", None)
    job.optima_popped = None
    return popped if popped is not None and popped.started is not None else None


def unstart(connection, queue, popped):
    """Take back the start the pop wrote for ``popped`` (``dequeue.Popped``): its id then waits in its queue's
    intermediate list, popped and not started, as a pop without a start left it."""
    _plan, execution_id = popped.started
    job_id = popped[1]
    composite = f"{job_id}:{execution_id}"
    before = []
    data = popped.data or {}
    for name in _START_FIELDS:
        value = data.get(name.encode())
        before += [name, "0", ""] if value is None else [name, "1", value]
    connection.eval(
        UNSTART_LUA,
        5,
        keys.started_key(queue.name),
        keys.job_key(job_id),
        keys.intermediate_key(queue.key),
        keys.execution_key(composite),
        keys.worker_executions_key(_plan.worker.name),
        composite,
        execution_id,
        job_id,
        *before,
    )
    popped.started = None


# KEYS: the job's started registry, its hash, its queue's intermediate list. ARGV: the started entry, the execution
# id, the job id. A start whose pop's reply was lost: its entry gone, the job QUEUED again (while its hash still
# names this execution), its id in the intermediate list (then given back to the head of its queue) -> 1; 0 when
# the entry was gone already.
RECLAIM_LUA = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.pcall('HGET', KEYS[2], '@FIELD@') == ARGV[2] then
  redis.call('HSET', KEYS[2], 'status', 'queued')
end
redis.call('RPUSH', KEYS[3], ARGV[3])
return 1
""".replace("@FIELD@", execution_record.FIELD)


def reclaim(worker, lost):
    """The jobs that pops of ``worker`` whose replies were never read (``lost``: their execution ids,
    ``Dequeuer.unanswered``) may have started, back to the head of their queues, their attempts not counted. Such a
    job is in its started registry, named as run by this worker, which is alive: the abandoned-job scan leaves it to
    the worker (a pop without a start left it in the intermediate list, where the scan finds it). Only those
    executions: a job the worker runs is never one of them. -> how many went back."""
    back = 0
    for queue in worker.queues:
        registry = keys.started_key(queue.name)
        for entry in worker.connection.zrange(registry, 0, -1):
            composite = entry.decode("utf-8", "replace") if isinstance(entry, bytes) else str(entry)
            job_id, _, execution_id = composite.rpartition(":")
            if execution_id not in lost:
                continue
            intermediate = keys.intermediate_key(queue.key)
            args = (registry, keys.job_key(job_id), intermediate, composite, execution_id, job_id)
            if worker.connection.eval(RECLAIM_LUA, 3, *args) and give_back(worker.connection, queue.key, job_id):
                back += 1
                worker.log.info(
                    "Worker %s: job %s back at the head of its queue, not started: its pop's reply was lost",
                    worker.name,
                    job_id,
                )
    return back


class _Written:
    """A pipeline for ``set_state`` whose HSET the pop's script sent already (``adopt``)."""

    def hset(self, *args, **kwargs):
        return None
