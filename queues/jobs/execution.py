"""One attempt's record in Redis: the started registry's entry and one field of the job's hash (issue 36).

rq 3.0 records an execution in five keys: the started registry's entry ``<job id>:<execution id>``, a hash
``<p>:execution:<job id>:<execution id>`` (its worker, start and heartbeat), the job's sorted set of executions
``<p>:executions:<job id>``, the worker's set of executions ``<p>:worker:<name>:executions``, and the expiries
of the last three: nine Redis commands a job between the start and the end, beyond the started entry. What they
say is already in the job's hash (its worker, start and heartbeat: rq's ``prepare_for_execution`` writes them
in the same start), except which execution is the job's current one. So an OptimaWorker writes that as one
more field of the job's hash (``FIELD``, in the HSET of the start that writes the job STARTED: no command of
its own), and the started entry; the end takes the entry off. Three commands a job (ZADD at the start, ZREM at
the end, and the field), where rq's make ten.

rq's hash and the worker's set (``RQ_EXECUTION_RECORDS``, default False since the release after fdf9480: six
commands a job, HSET, EXPIRE, SADD, EXPIRE at the start, DEL and SREM at the end) are written for those who read
them alone: the workers of a release up to 6f24d7d tell a running job from an abandoned one by the hash, and
without it their abandoned-job scan takes the started entry of a job that a worker of this release runs for stale
and drops it: if that worker then dies, the job is never run again (tests/queues/resilience/test_mixed_versions.py).
Their panel, rq's ``rq info`` and django-rq's pages find a worker's current job through both. So a deploy from
such a release turns them on until its workers are gone (docs/settings.md); the check ``queues.W063``
(``validate``) sees such a worker at work while they are off. The job's
set of executions goes at once: nothing reads it but rq's ``Job.get_executions()``, which this app does not
call (rq calls it from ``Job.delete``, to take the job's started entries off: the app deletes through
``queues/operator``, and an entry left that way has no job and is dropped by the abandoned-job scan).

Who reads the record:

- the owner of a started entry (``owners``: the abandoned-job scan, the panel's worker page) is the worker its
  hash names, or without one the job's ``worker_name`` while the job's hash names that execution; it has no
  owner once the job runs again under another one (a stale entry);
- the panel's list of started jobs shows the hash, or without one the start and the heartbeat of the job's
  hash (``shown``); its worker page finds the worker's current job among the started entries of its queues.
"""

import random
import uuid

import redis
from django.core.exceptions import ImproperlyConfigured
from rq.executions import Execution as RQExecution
from rq.utils import now

from queues import conf, rqcompat
from queues.catalog import queues as declarations
from queues.connection import clients, servers
from queues.jobs import meta as jobmeta
from queues.keyspace import keys

FIELD = jobmeta.EXECUTION


def new_id():
    """A new execution's id: a version 4 uuid's 32 hex digits, as rq's ``uuid4().hex``, but from the ``random``
    module's generator (seeded from the system's in each process, again after a fork) rather than ``os.urandom``.
    An execution id is to be unique among a job's executions, not unguessable; and urandom's getrandom(2) lets go
    of the GIL, which the concurrent worker's main thread, starting every job, then waits to get back behind its
    job threads: up to the switch interval, 5 ms (issue 36: 2.6 against 1.8 µs an id alone, but 4.9 ms against
    3.5 µs while 8 threads run Python; 2 of the 24.6 s of the main thread's wall time under pyinstrument at
    ``--async 500``)."""
    return uuid.UUID(int=random.getrandbits(128), version=4).hex


class Execution(RQExecution):
    """rq's Execution (``worker.executions``, ``stop-execution``, the Result's execution fields) written as the
    module says: no sorted set of the job's executions, and rq's hash and the worker's set only when
    ``rq_records``."""

    rq_records = False  # OPTIMA_QUEUES_OPTIONS["RQ_EXECUTION_RECORDS"]: rq's hash and the worker's set written

    @classmethod
    def create(cls, job, ttl, pipeline, worker_name="", rq_records=False):
        """Queue on ``pipeline`` the start of a new execution of ``job``: its started entry (rq's
        ``Execution.create`` without the job's set of executions, and without the hash and the worker's set
        unless ``rq_records``); the job's hash is to name it: ``started_into`` or ``named_into``."""
        execution = cls(id=new_id(), job_id=job.id, connection=job.connection, worker_name=worker_name)
        rqcompat.set_execution_job(execution, job)
        job.started_job_registry.add_execution(execution, pipeline=pipeline, ttl=ttl, xx=False)
        if rq_records:  # for the workers and the panel of a release up to 6f24d7d, and rq's own tools
            execution.rq_records = True
            execution.save(ttl=ttl, pipeline=pipeline)
            if worker_name:  # the worker's heartbeat keeps its expiry (rq's Worker.heartbeat)
                pipeline.sadd(execution.worker_executions_key, execution.composite_key)
                pipeline.expire(execution.worker_executions_key, ttl + 60)
        return execution

    def delete(self, job, pipeline):
        """Queue the end of the execution on ``pipeline``: its started entry (and its hash and worker's member)."""
        job.started_job_registry.remove_execution(execution=self, pipeline=pipeline)
        if self.rq_records:
            pipeline.delete(self.key)
            if self.worker_name:
                pipeline.srem(self.worker_executions_key, self.composite_key)

    def heartbeat(self, started_job_registry, ttl, pipeline):
        """rq's ``maintain_heartbeats`` (the forking worker): the started entry's expiry pushed on (the job's
        ``last_heartbeat`` is written by rq's ``Job.heartbeat`` in the same pipeline), and the hash's."""
        self.last_heartbeat = now()
        if self.rq_records:
            pipeline.hset(self.key, "last_heartbeat", self.last_heartbeat.timestamp())
            pipeline.expire(self.key, ttl)
        started_job_registry.add_execution(self, ttl=ttl, pipeline=pipeline, xx=True)


class _Naming:
    """The start's pipeline as rq's ``Job.prepare_for_execution`` sees it: its one HSET of the job's hash also
    carries ``FIELD``, so naming the execution costs no command."""

    def __init__(self, pipe, execution_id):
        self._pipe, self._execution_id = pipe, execution_id

    def hset(self, name, key=None, value=None, mapping=None):
        return self._pipe.hset(name, key, value, mapping={**(mapping or {}), FIELD: self._execution_id})


def started_into(job, worker_name, execution, pipe):
    """Queue rq's ``prepare_for_execution`` of ``job`` (STARTED, its worker, start and heartbeat) on ``pipe``,
    naming ``execution`` in the same HSET (a worker that runs its jobs itself: ``worker/fastpath.py``)."""
    job.prepare_for_execution(worker_name, pipeline=_Naming(pipe, execution.id))


def named_into(job, execution, pipe):
    """Queue the naming of ``execution`` and its worker in ``job``'s hash (the forking worker, whose horse writes
    the rest later: until then the hash would still name the worker of an earlier attempt, or none, and a scan
    would take the job, not yet STARTED, for one whose horse never began and push it back while it starts)."""
    pipe.hset(job.key, mapping={FIELD: execution.id, "worker_name": execution.worker_name})


def owners(connection, composites):
    """The worker running each started entry ``<job id>:<execution id>`` of ``composites``, or "" when none
    does (ended, run again under another execution, its job gone, a key of the wrong type, or an entry that is
    not ``<job id>:<execution id>``). One round trip."""
    parsed = [composite.split(":") for composite in composites]
    with connection.pipeline(transaction=False) as pipe:
        for composite, parts in zip(composites, parsed):
            if len(parts) == 2:
                pipe.hget(keys.execution_key(composite), "worker_name")  # a hash of rq's records, if any
                pipe.hmget(keys.job_key(parts[0]), "worker_name", FIELD)
        replies = iter(pipe.execute(raise_on_error=False))
    found = []
    for parts in parsed:
        if len(parts) != 2:
            found.append("")
            continue
        old, current = next(replies), next(replies)
        if isinstance(old, bytes):
            found.append(old.decode("utf-8", "replace"))
        elif isinstance(current, list) and current[1] == parts[1].encode() and isinstance(current[0], bytes):
            found.append(current[0].decode("utf-8", "replace"))
        else:
            found.append("")
    return found


def shown(job, execution_id, job_hash, execution_hash):
    """The execution ``execution_id`` of ``job`` as the panel's started list shows it (rq's Execution: id,
    start, heartbeat, worker), from the job's raw hash, or from its own hash when a release from before this
    change wrote one; None when the job's hash names another execution (a stale entry: not listed)."""
    execution = RQExecution(id=execution_id, job_id=job.id, connection=job.connection)
    if execution_hash:
        execution.restore(execution_hash)  # raises on a hash rq cannot read: the caller leaves it out
        return execution
    if not isinstance(job_hash, dict) or job_hash.get(FIELD.encode()) != execution_id.encode():
        return None
    started = getattr(job, "started_at", None)  # None for a job the panel shows as corrupt
    execution.created_at = started
    execution.last_heartbeat = getattr(job, "last_heartbeat", None) or started
    execution.worker_name = getattr(job, "worker_name", None) or ""
    return execution


# Started entries of each queue the check below reads: enough to see a worker of an earlier release at work on
# any queue it serves (it holds one entry a job it runs), few enough that ``manage.py check`` stays quick.
SAMPLE = 200


def started_by_earlier_release(connection, queue_names, sample=SAMPLE):
    """The ids of the STARTED jobs, among the first ``sample`` started entries of each of ``queue_names``, whose
    hash names no execution (``FIELD``): started by a worker of a release up to 6f24d7d, which writes rq's records
    only (every worker since names its execution in the HSET that writes the job STARTED). Two round trips; a
    key of the wrong type reads as no entry."""
    with connection.pipeline(transaction=False) as pipe:
        for name in queue_names:
            pipe.zrange(keys.started_key(name), 0, sample - 1)
        entries = [reply for reply in pipe.execute(raise_on_error=False) if isinstance(reply, list)]
    job_ids = sorted({entry.decode("utf-8", "replace").split(":")[0] for reply in entries for entry in reply})
    with connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(keys.job_key(job_id), "status", FIELD)
        replies = pipe.execute(raise_on_error=False)
    return [
        job_id
        for job_id, reply in zip(job_ids, replies)
        if isinstance(reply, list) and reply[0] == b"started" and reply[1] is None
    ]


def validate(timeout=None):
    """queues.W063: ``RQ_EXECUTION_RECORDS`` is False while a job on one of the queues' Redis servers was started
    by a worker of a release up to 6f24d7d (``started_by_earlier_release``): that worker's abandoned-job scan
    drops the started entry of a job a worker of this release runs, and the job is never run again if that
    worker dies. [] when the option is True, the configuration is broken (other checks say how) or a server is
    unreachable (with /healthz's short timeout)."""
    if conf.options().get("RQ_EXECUTION_RECORDS") is not False or servers.validate():
        return []
    timeout = conf.options()["HEALTH_TIMEOUT"] if timeout is None else timeout
    found = {}
    try:
        on = {server: declarations.on_server(server) for server in servers.names()}
    except ImproperlyConfigured:  # a queue's declaration is refused: E002-E010 report it
        return []
    for server, names in on.items():
        if not names:
            continue
        try:
            client = clients.probe_client("queues", timeout, server=server)
        except (ValueError, ImproperlyConfigured):  # a malformed URL or sentinel list: E040/E041/E131 say so
            continue
        try:
            job_ids = started_by_earlier_release(client, names)
        except redis.RedisError:
            continue
        finally:
            client.close()
        if job_ids:
            found[server] = job_ids
    if not found:
        return []
    seen = "; ".join(
        f"{clients.describe('queues', server)}: {len(ids)} job(s), e.g. {ids[0]}" for server, ids in found.items()
    )
    return [
        conf.Problem(
            "queues.W063",
            "OPTIMA_QUEUES_OPTIONS['RQ_EXECUTION_RECORDS'] is False, but workers of a release up to 6f24d7d "
            f"run jobs on the same Redis and prefix ({seen}): their abandoned-job scan would drop the started "
            "entry of a job this release's workers run, and the job would never run again if its worker died.",
            "Set QUEUE_RQ_EXECUTION_RECORDS=1 (RQ_EXECUTION_RECORDS True) on this release's workers until no worker "
            "of that release is left, then remove it (docs/settings.md, RQ_EXECUTION_RECORDS).",
            level="warning",
        )
    ]
