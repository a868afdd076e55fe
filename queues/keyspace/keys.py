"""Every Redis key name this project reads or writes, in one place.

rq 3.0 derives its own keys from ``RQ_KEY_PREFIX`` (= ``QUEUE_PREFIX``, docs/decisions.md); these
functions build them with rq's own helpers (class attributes and templates) wherever rq has one, so
a key that rq renames is renamed here too. The project's own keys live under
``<prefix>:optima:...`` (``conf.app_key``). Nothing here talks to Redis: a leaf module.

=====================================  ======================================================
key                                    what
=====================================  ======================================================
``<p>:queue:<q>``                      rq's queue (list of job ids)
``<p>:queue:<q>:high``                 the queue's high band: jobs enqueued with ``priority`` > 0 (``band_key``)
``<p>:queue:<q>:low``                  the queue's low band: ``priority`` < 0 (the normal band is ``<p>:queue:<q>``)
``<p>:queue:<q>:intermediate``         jobs popped by a worker, not yet started (rq's name; one for all bands)
``<p>:wip:<q>``                        rq's started registry (``<job id>:<execution id>``)
``<p>:execution:<job>:<exec>``         rq's execution hash (names its worker): with RQ_EXECUTION_RECORDS only
``<p>:executions:<job>``               rq's executions of one job: written by releases up to 6f24d7d only
``<p>:worker:<name>:executions``       rq's executions of one worker: with RQ_EXECUTION_RECORDS only
``<p>:rl-keys``                        rq's set of the limit keys in use (``queues.producer.limits``: ``<q>:<key>``)
``<p>:rl:<q>:<key>``                   rq's hash of a limit key's ``concurrency``
``<p>:rl:<q>:<key>:allowed``           rq's zset of the jobs holding one of the key's slots (queued, started)
``<p>:rl:<q>:<key>:rate_limited``      rq's zset of the key's held jobs, oldest first
``<p>:optima:paused``                  set of paused queue names (``queues.catalog.pause``)
``<p>:optima:banded:<q>``              "1" for a day after a push to a band of ``<q>``: workers poll it (dequeue.py)
``<p>:optima:alive:<worker>``          a worker's liveness key (``worker/liveness.py``)
``<p>:optima:lock:abandoned-scan``     one abandoned-job scan at a time
``<p>:optima:intermediate-seen:<q>``   when the scan first saw each popped-not-started job
``<p>:optima:metrics:<q>``             counters, histogram buckets, duration sum (``queues.metrics``)
``<p>:optima:metrics:<q>:durations``   the last 50 completed durations, ms, newest first
``<p>:optima:unique:<q>:<key>``        the job holding a ``unique=`` key (``queues.producer.api``)
``<p>:optima:debounce:<q>:<key>``      hash: the pending job of a ``debounce_key`` and its window's start
                                       (``queues.producer.dedupe``; expires an hour after its latest start)
``<p>:optima:throttle:<q>:<key>``      hash: the job of a ``throttle_key``'s window (expires with the window)
``<p>:optima:reconcile:last``          when workers last reconciled the dead letters
``<p>:optima:quarantined``             entries dropped, set aside or buried corrupt, per kind (``keyspace/repeats``)
``<p>:optima:history``                 the last 61 once-a-minute samples of the counters (``metrics/history.py``)
``<p>:optima:lock:history-sample``     one history sample per minute (expires at the next minute)
``<p>:optima:history:10m``             the last 433 ten-minute samples: 72 h (``metrics/history.py``)
``<p>:optima:replication-probe``       written before a WAIT confirming an earlier write (``replication.confirm``; 60 s)
``<p>:optima:schedule-last:<id>``      the job id of a periodic schedule's latest run (``queues.periodic.schedules``)
``<p>:optima:schedules-paused``        set of paused schedule ids (the scheduler skips their ticks)
``<p>:optima:schedule-runs:<id>``      a schedule's last 50 finished runs, JSON, newest first (``periodic.history``)
``<p>:optima:search:queue:<q>``        job ids of queue ``<q>`` by enqueue time (search index)
``<p>:optima:search:func:<f>``         job ids of function ``<f>`` (dotted path) by enqueue time (search index)
``<p>:optima:search:owner:<o>``        job ids of owner ``<o>`` (``meta["owner"]``) by enqueue time (search index)
``<p>:optima:search:functions``        function -> its latest enqueue time (search index; the panel's choices)
``<p>:optima:search:owners``           owner -> its latest enqueue time (search index; the trim walks it)
``<p>:optima:batch:<id>``              a batch's hash: state, times, callbacks (``queues.workflows``)
``<p>:optima:batch:<id>:<set>``        its sets of job ids: members, done, dead, adders, canceled
``<p>:optima:batches``                 batches by ``<callback queue>|<state>``: counts kept by the batch scripts
``<p>:optima:batch-workers``           workers that count batch members -> since (older ones are not in it)
``<p>:optima:chain:<id>``              a chain's hash: steps, state, each step's batch and jobs (``queues.workflows``)
``<p>:optima:batch-index``             batch id -> when it opened: the panel's list (``workflows/index.py``, trimmed)
=====================================  ======================================================

Whoever can write to this Redis can plant anything under any of these keys. Each family is read
through one reader that never raises for what an entry holds: a bad entry is reported once
(``queues/keyspace/entries.py``: ERROR with its key, escaped and masked) and skipped, or shown as corrupt;
rq's and rq-scheduler's own reads (registration, maintenance, the scheduler's moves) run inside the
worker side's boundary (``queues/keyspace/quarantine.py``).

=====================================  ======================================================
family                                 read through
=====================================  ======================================================
queue lists (and their bands)          ``board.readonly.ReadOnlyQueue`` (panel), ``metrics.scrape``,
                                       the workers' pop (``worker/dequeue.py``)
job hashes, field by field             ``jobs.read.load`` / ``fetch_many``: a job, None, or a
                                       ``CorruptJob`` (bytes, ids rq rejects, > 256 KiB, ...)
registries (started, finished,         ``board.readonly`` (panel, read-only), ``failures/reconcile.py``,
failed, scheduled, deferred, canceled) ``worker/abandoned.py``, ``metrics.scrape``
results streams                        ``jobs.results.read`` (``ReadJob.results`` / ``latest_result``)
worker sets and hashes                 ``board.readers`` (``members``, ``JSONWorker``), ``metrics.scrape``
rq-scheduler's set, schedule templates ``board.readers.read_only_scheduler``, ``board.periodic.rows``
and last runs, the schedules' pause
limit keys (``rl-keys``, ``rl:*``)     ``producer.limits``, ``metrics.scrape``
unique keys                            ``producer.api`` / ``producer.write``
debounce and throttle keys             ``producer.dedupe`` (its Lua reads them)
counters and durations (metrics)       ``metrics.scrape``
history samples                        ``metrics.history.read``
search index (``search:*``)            ``search.find`` (a member whose job is gone is dropped)
the pause set                          ``board.readers.members`` (panel), ``catalog.pause``
the batch index, batches' hashes/sets ``board.batches`` (panel: a key of the wrong type is left out)
=====================================  ======================================================
"""

from rq.executions import WORKER_EXECUTIONS_KEY_TEMPLATE, Execution, ExecutionRegistry
from rq.intermediate_queue import IntermediateQueue
from rq.job import Job
from rq.queue import Queue
from rq.rate_limit import RateLimitRegistry
from rq.registry import FailedJobRegistry, FinishedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from rq.results import Result
from rq.worker import Worker

from queues import conf


def queue_key(name):
    return Queue.redis_queue_namespace_prefix + name


def band_key(queue_key_, band):
    """The list of one band of a queue (``queues.jobs.meta.band``): the queue's own list for the normal
    band, ``<queue key>:high`` / ``<queue key>:low`` for the others. Queue names hold no ':'
    (``conf.QUEUE_NAME_RE``), so a band never shares a key with a queue, and rq's ``Queue.all``
    (the set ``<p>:queues``) never lists one."""
    return queue_key_ if band == "normal" else f"{queue_key_}:{band}"


def band_keys(queue_key_):
    """The queue's three lists in pop order: high, normal, low."""
    return [f"{queue_key_}:high", queue_key_, f"{queue_key_}:low"]


def intermediate_key(queue_key_):
    """The list a popped job waits in until it starts (rq's own name for it)."""
    return IntermediateQueue.get_intermediate_queue_key(queue_key_)


def job_key(job_id):
    return Job.key_for(job_id)


def job_key_prefix():
    return Job.redis_job_namespace_prefix


def results_key(job_id):
    """rq 3's stream of a job's results (``<p>:results:<id>``)."""
    return Result.get_key(job_id)


def started_key(name):
    return StartedJobRegistry.key_template.format(name)


def finished_key(name):
    return FinishedJobRegistry.key_template.format(name)


def failed_key(name):
    return FailedJobRegistry.key_template.format(name)


def scheduled_key(name):
    return ScheduledJobRegistry.key_template.format(name)


def execution_key(composite):
    """``<p>:execution:<job id>:<execution id>`` (rq builds it in ``Execution.key``), for any entry of the started
    registry: split at its last ``:``, where rq's ``from_composite_key`` raises on a job id holding one."""
    job_id, _, execution_id = composite.rpartition(":")
    return Execution(id=execution_id, job_id=job_id, connection=None).key


def job_executions_key(job_id):
    return ExecutionRegistry.key_template.format(job_id)


def worker_key(worker_name):
    """rq's hash of a worker (``<p>:worker:<name>``)."""
    return Worker.redis_worker_namespace_prefix + worker_name


def worker_executions_key(worker_name):
    return WORKER_EXECUTIONS_KEY_TEMPLATE.format(worker_name)


def limit_keys_key():
    """rq's set of the rate-limit keys in use (``queues.producer.limits``)."""
    return RateLimitRegistry.rl_keys_key


def _limit_registry(scoped_key):
    registry = RateLimitRegistry.__new__(RateLimitRegistry)  # its key names only: no connection, no scripts
    registry.key = scoped_key
    return registry


def limit_config_key(scoped_key):
    """rq's hash of a limit key's ``concurrency`` (``<p>:rl:<q>:<key>``)."""
    return _limit_registry(scoped_key).config_key


def limit_allowed_key(scoped_key):
    return _limit_registry(scoped_key).allowed_key


def limit_held_key(scoped_key):
    """rq's zset of the jobs a limit key holds back (``<p>:rl:<q>:<key>:rate_limited``)."""
    return _limit_registry(scoped_key).rate_limited_key


# -- this project's own keys ---------------------------------------------------------------
def paused_key():
    return conf.app_key("paused")


def banded_key(name):
    """Set (with a TTL, ``BANDED_SECONDS``) by every push to the high or low band of queue ``name``:
    a worker of that queue alone polls it instead of blocking on the normal band (worker/dequeue.py)."""
    return conf.app_key("banded", name)


BANDED_SECONDS = 24 * 3600


def alive_key(worker_name):
    return conf.app_key("alive", worker_name)


def scan_lock_key():
    return conf.app_key("lock", "abandoned-scan")


def intermediate_seen_key(name):
    return conf.app_key("intermediate-seen", name)


def metrics_key(queue):
    return conf.app_key("metrics", queue)


def durations_key(queue):
    return conf.app_key("metrics", queue, "durations")


def unique_key(queue, key):
    return conf.app_key("unique", queue, key)


def dedupe_key(queue, mode, key):
    """The key of a ``debounce_key`` (``mode`` "debounce") or ``throttle_key`` ("throttle") of ``queue``."""
    return conf.app_key(mode, queue, key)


def reconcile_key():
    return conf.app_key("reconcile", "last")


def quarantined_key():
    """The hash counting, per kind, the entries dropped, set aside or buried corrupt (``keyspace/repeats.py``)."""
    return conf.app_key("quarantined")


def history_key():
    """The capped list of once-a-minute samples of every queue's cumulative counters, newest first."""
    return conf.app_key("history")


def history_coarse_key():
    """The capped list of once-every-ten-minutes samples (72 h), newest first, same entries as ``history_key``."""
    return conf.app_key("history", "10m")


def history_lock_key():
    return conf.app_key("lock", "history-sample")


def schedule_last_key(schedule_id):
    """The job id of the latest run a scheduler enqueued for periodic schedule ``schedule_id``."""
    return conf.app_key("schedule-last", schedule_id)


def schedule_runs_key(schedule_id):
    """The last finished runs of periodic schedule ``schedule_id`` (``queues.periodic.history``)."""
    return conf.app_key("schedule-runs", schedule_id)


def schedules_paused_key():
    return conf.app_key("schedules-paused")


def replication_probe_key():
    """A write of the connection that then WAITs for replicas (queues/connection/replication.py ``confirm``)."""
    return conf.app_key("replication-probe")


def search_queue_key(name):
    """Search index: the job ids of queue ``name``, scored by enqueue time (``queues.search.index``)."""
    return conf.app_key("search", "queue", name)


def search_func_key(func_path):
    return conf.app_key("search", "func", func_path)


def search_owner_key(owner):
    return conf.app_key("search", "owner", str(owner))


def search_functions_key():
    """Search index: function path -> its latest enqueue time (the panel's list of functions)."""
    return conf.app_key("search", "functions")


def search_owners_key():
    """Search index: owner -> its latest enqueue time (what the housekeeping trim walks)."""
    return conf.app_key("search", "owners")


def batch_key(batch_id, part=""):
    """A batch (``queues.workflows``): its hash, or with ``part`` one of its sets of job ids (``members``,
    ``done``, ``dead``, ``adders``, ``canceled``). All expire with the jobs' retention after the batch ends."""
    return conf.app_key("batch", batch_id, part) if part else conf.app_key("batch", batch_id)


def batches_key():
    """Batches by ``<queue of the callback>|<state>`` (a hash of counts, ``queues.workflows.scripts``): /metrics."""
    return conf.app_key("batches")


def chain_key(chain_id):
    """A chain (``queues.workflows.chains``): its steps, state and each step's batch and jobs."""
    return conf.app_key("chain", chain_id)


def workers_key():
    """rq's set of the registered workers' keys."""
    return Worker.redis_workers_keys


def batch_workers_key():
    """The workers that count batch members (``queues.workflows.hook``): worker key -> when it started. A
    registered worker missing from it runs an older release (``queues.batch()`` warns)."""
    return conf.app_key("batch-workers")


def batch_index_key():
    """The batches the panel lists (``queues.workflows.index``): batch id -> when it opened (unix seconds),
    written in the MULTI that opens it, trimmed by age and length at each write."""
    return conf.app_key("batch-index")
