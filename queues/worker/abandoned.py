"""Jobs whose worker is gone: found within seconds and put back on their way.

Where a job can be when its worker dies (rq 3.0 keys; ``<p>`` is QUEUE_PREFIX):

1. Popped but not started: in ``<p>:queue:<q>:intermediate``. Every dequeue of an OptimaWorker is an
   atomic LMOVE from the queue into that list (rq does it for one queue; ``dequeue.py`` does it for
   several), and the job leaves it in the same MULTI that records it as started.
2. Started: an entry ``<job id>:<execution id>`` in the started registry ``<p>:wip:<q>``, its worker the
   job's ``worker_name`` while the job's hash names that execution (``queues/jobs/execution.py``; a
   release before issue 36's fifth pass wrote an execution hash ``<p>:execution:<job id>:<execution id>``
   naming it: read first).

A worker is alive while its key ``<p>:optima:alive:<worker name>`` exists: the worker's lifeline
thread sets it every ``LIVENESS_INTERVAL_SECONDS`` to expire after ``LIVENESS_TTL_SECONDS``
(``liveness.py``). Every live worker offers to scan; a lock lets one of them do it every
``ABANDONED_SCAN_SECONDS``. A scan reads at most ``LIMIT`` entries per queue and per list (a few
commands per queue: cheap, and bounded however large the queues are), and:

- a started job whose worker is not alive lost an attempt: the next one is scheduled with the queue's
  backoff (``queues.failures.retry.schedule_retry``), or, with no attempt left, the job is dead-lettered
  with reason ``abandoned`` and mirrored (``queues.failures.deadletter.bury``); either way a job with a limit
  key gives its slot to the next held job of its key (``queues.producer.limits``), and its retry goes
  through the limit again;
- a job registered as started whose work horse never began (status still ``queued``) goes back to the
  head of its queue (its priority band: ``queues.keyspace.keys.band_key``) without losing an attempt;
- a popped job left in an intermediate list for ``LIVENESS_TTL_SECONDS`` (seen by two scans) goes back
  to the head of its queue's band, also without losing an attempt; one whose hash is gone is dropped;
- poison never stops a scan: an entry whose id is not UTF-8 and a list or registry key of the wrong
  type are skipped (an ERROR names the key); a started job whose worker is gone and whose hash
  cannot be read as a job is dead-lettered as ``corrupt`` (``deadletter.bury_corrupt``, its raw hash
  kept), or, with no hash to keep (a key that is not a hash, no ``data``), its entry is dropped;
- workers that died without saying so leave RQ's worker registry (``<p>:workers``), so worker counts
  are right within seconds (only workers that carry the liveness mark, i.e. OptimaWorkers).

rq's own clean-up of the started registry (every 10 minutes in workers, and on every ``.count`` of
the registry, e.g. by django-rq's dashboard) fails such jobs without a retry, and drops a ``queued``
one outright. OptimaWorkers therefore give their started entries a long TTL (``STARTED_ENTRY_TTL_SECONDS``,
default 1 h) so that it is this scan, not rq's, that handles them, even after every worker was down.
"""

import logging
import time
import uuid

import redis
from rq.exceptions import NoSuchJobError
from rq.job import JobStatus
from rq.utils import as_text, parse_composite_key
from rq.worker_registration import REDIS_WORKER_KEYS, WORKERS_BY_QUEUE_KEY

from queues.catalog.lookup import OptimaQueue
from queues.connection.outage import REDIS_ERRORS
from queues.events import hooks
from queues.failures import deadletter, retry
from queues.jobs import execution as execution_record
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.keyspace import keys, quarantine
from queues.producer import limits

logger = logging.getLogger("queues.resilience")

LIMIT = 500  # entries read per queue and per list in one scan
LIVENESS_MARK = "optima_liveness"  # field of RQ's worker hash: this worker keeps an alive key

# Take a popped job back from an intermediate list to the head of its band of its queue — unless
# someone else already did (the LREM decides who owns it, so the job is never pushed twice). The band
# is read from the job's meta here (``priority``, jobs/meta.py), not passed in: some callers hold only
# the id (the scan of intermediate lists), and a meta that cannot be read (no hash, another type, not
# JSON) means the normal band, as for any job without a priority. The push says so in the job: its hash's
# ``jobs.meta.PUT_BACK`` field (ARGV[2], the path) vouches for its next pop (``jobs.gate.replayed``). KEYS:
# intermediate list, normal, high and low bands, job hash. ARGV: the id, the path.
GIVE_BACK_LUA = """
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  local target = KEYS[2]
  local raw = redis.pcall('HGET', KEYS[5], 'meta')
  if type(raw) == 'string' then
    local ok, meta = pcall(cjson.decode, raw)
    local priority = ok and type(meta) == 'table' and meta['priority']
    if type(priority) == 'number' and priority == math.floor(priority) then
      if priority > 0 then target = KEYS[3] elseif priority < 0 then target = KEYS[4] end
    end
  end
  if redis.call('TYPE', KEYS[5]).ok == 'hash' then
    redis.call('HSET', KEYS[5], '@PUT_BACK@', ARGV[2])
  end
  redis.call('LPUSH', target, ARGV[1])
  return 1
end
return 0
""".replace("@PUT_BACK@", jobmeta.PUT_BACK)


def give_back(connection, queue_key, job_id, path=jobmeta.PUT_BACK_GIVE_BACK):
    """Move ``job_id`` from the intermediate list of ``queue_key`` to the head of its band of the queue,
    its hash marked put back by ``path`` (``jobs.meta.PUT_BACK``). True when this call moved it; False
    when it was not there (already taken back, or started)."""
    high, normal, low = keys.band_keys(queue_key)
    return bool(
        connection.eval(
            GIVE_BACK_LUA, 5, keys.intermediate_key(queue_key), normal, high, low, keys.job_key(job_id), job_id, path
        )
    )


def live_workers(connection, names):
    names = sorted(set(names))
    if not names:
        return set()
    with connection.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.exists(keys.alive_key(name))
        found = pipe.execute()
    return {name for name, exists in zip(names, found) if exists}


def forget_execution(pipe, queue_name, job_id, execution_id, worker_name):
    """Queue the deletion of one execution record (RQ's Execution.delete, without needing the job; the hash and
    the job's set of executions a release before issue 36's fifth pass wrote too)."""
    composite = f"{job_id}:{execution_id}"
    pipe.zrem(keys.started_key(queue_name), composite)
    pipe.delete(keys.execution_key(composite))
    pipe.zrem(keys.job_executions_key(job_id), execution_id)
    if worker_name:
        pipe.srem(keys.worker_executions_key(worker_name), composite)


def abandoned_message(job, worker_name):
    attempt = jobmeta.current_attempt(job)
    who = f"worker {worker_name}" if worker_name else "its worker"
    return (
        f"rq.exceptions.AbandonedJobError: {who} died (no liveness beat) while running attempt {attempt} "
        f"of job {job.id}; the attempt counts as failed"
    )


class Scan:
    """One pass over the started registries and intermediate lists of ``queue_names``."""

    def __init__(self, connection, queue_names, *, stale_after, log=logger):
        self.connection = connection
        self.queue_names = list(queue_names)
        self.stale_after = stale_after
        self.log = log
        self.counts = {"retried": 0, "dead": 0, "requeued": 0, "dropped": 0, "workers_removed": 0}

    def run(self):
        for name in self.queue_names:
            started_ids = self.skipping_wrong_types(self.started, name, default=set())
            self.skipping_wrong_types(self.intermediate, name, started_ids)
        try:
            self.dead_workers()
        except redis.ResponseError as exc:  # rq's worker registry of another type (planted): set aside
            quarantine.settle(
                self.connection,
                lambda: {REDIS_WORKER_KEYS: "set"},
                exc,
                who="Abandoned-job scan",
                what="find dead workers",
                log=self.log,
            )
        return self.counts

    def skipping_wrong_types(self, step, name, *args, default=None):
        """``step(name, *args)``; a key of the wrong type (planted) skips this step for this queue, and is
        renamed aside with an ERROR naming it (``queues.keyspace.quarantine``) for the next scan."""
        try:
            return step(name, *args)
        except redis.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
            queue_key = keys.queue_key(name)
            quarantine.settle(
                self.connection,
                lambda: {
                    keys.started_key(name): "zset",
                    **dict.fromkeys(keys.band_keys(queue_key), "list"),
                    keys.intermediate_key(queue_key): "list",
                    keys.intermediate_seen_key(name): "hash",
                },
                exc,
                who="Abandoned-job scan",
                what=f"scan the {step.__name__} jobs of queue {name}",
                log=self.log,
            )
            return default

    def _text_entries(self, key, entries):
        """The entries that are UTF-8, as text; the others are skipped with an ERROR naming the key."""
        texts = []
        for entry in entries:
            try:
                texts.append(as_text(entry))
            except UnicodeDecodeError:
                self.log.error("Abandoned-job scan: skipped entry %r of %s: not UTF-8", entry, key)
        return texts

    # -- started registry -------------------------------------------------------------------
    def started(self, name):
        """Handle the started entries of ``name`` whose worker is gone; return every job id seen."""

        queue = OptimaQueue(name, connection=self.connection)
        wip_key = keys.started_key(name)
        entries = []
        for entry in self._text_entries(wip_key, self.connection.zrange(wip_key, 0, LIMIT - 1)):
            if entry.count(":") == 1:
                entries.append(entry)
            elif ":" in entry:  # planted: rq's parse_composite_key raises on it, and so stopped every scan
                self.log.error(
                    "Abandoned-job scan: skipped entry %r of %s: not <job id>:<execution id>", entry, wip_key
                )
        if not entries:
            return set()
        parsed = [parse_composite_key(e) for e in entries]
        owners = execution_record.owners(self.connection, entries)  # "": none (a key of the wrong type too)
        alive = live_workers(self.connection, [w for w in owners if w])
        for (job_id, execution_id), owner in zip(parsed, owners):
            if owner and owner in alive:
                continue
            try:
                self.recover_started(queue, job_id, execution_id, owner)
            except NoSuchJobError:
                continue
            except REDIS_ERRORS:
                raise  # Redis is away: the whole scan waits (liveness.py)
            except Exception:  # noqa: BLE001 — one unreadable job must not stop the scan of the others
                self.log.exception(
                    "Abandoned-job scan: skipped started entry %s:%s of %s (job hash %s): it cannot be read",
                    job_id,
                    execution_id,
                    wip_key,
                    keys.job_key(job_id),
                )
        return {job_id for job_id, _ in parsed}

    def recover_started(self, queue, job_id, execution_id, worker_name):

        wip_key = keys.started_key(queue.name)
        if self.connection.zscore(wip_key, f"{job_id}:{execution_id}") is None:
            return  # finished meanwhile
        job = jobread.fetch(job_id, self.connection, check_origin=False, caps=jobread.RUN)  # a job as a worker runs it
        if job is None or jobread.is_corrupt(job):
            if job is not None:
                self.corrupt(queue, job, f"{job_id}:{execution_id}")
            self._forget(queue.name, job_id, execution_id, worker_name)
            self.counts["dropped"] += 1
            return
        status = job.get_status(refresh=False)
        runner = as_text(job.worker_name) if job.worker_name else ""
        if status == JobStatus.STARTED and runner and runner != worker_name and live_workers(self.connection, [runner]):
            pass  # a stale entry: the job runs again, on a live worker
        elif status == JobStatus.STARTED:
            self.abandoned(job, queue, worker_name)
        elif status == JobStatus.QUEUED:
            # Registered as started, but the work horse never began: not an attempt. Back to its band.
            band_key = keys.band_key(queue.key, jobmeta.band(job))
            if self.connection.lpos(band_key, job.id) is None:
                with self.connection.pipeline() as pipe:  # the push says so in the job (jobs.meta.PUT_BACK)
                    pipe.hset(job.key, jobmeta.PUT_BACK, jobmeta.PUT_BACK_ABANDONED)
                    pipe.lpush(band_key, job.id)
                    pipe.execute()
            self.counts["requeued"] += 1
            self.log.warning(
                "Job %s of dead worker %s had not started: back at the head of %s",
                job.id,
                worker_name or "?",
                queue.name,
            )
        self._forget(queue.name, job_id, execution_id, worker_name)

    def corrupt(self, queue, job, entry):
        """A started job of a dead worker that cannot be read: dead-lettered as corrupt with its raw hash,
        or, with no hash to keep, only named in the log (its started entry is dropped by the caller)."""

        keep = job.kind not in ("wrong_type", "no_data")
        self.log.error(
            "Abandoned-job scan: skipped started entry %s of %s (job hash %s): it cannot be read (%s); %s",
            entry,
            keys.started_key(queue.name),
            keys.job_key(job.id),
            job.why,
            "dead-lettered as corrupt" if keep else "entry dropped",
        )
        if keep:
            deadletter.bury_corrupt(self.connection, job.id, queue.name, dict(job.fields), job.why, count=job.count)

    def abandoned(self, job, queue, worker_name):

        message = abandoned_message(job, worker_name)
        self.log.warning("Job %s (%s): %s", job.id, queue.name, message.split(": ", 1)[1])
        started = job.started_at
        duration = max(0.0, time.time() - started.timestamp()) if started else 0.0
        retried = retry.schedule_retry(job, queue, reason=retry.ABANDONED)
        hooks.after_failure(job, jobmeta.queue_name(job), None, duration, retried)
        if retried:
            self.counts["retried"] += 1
        else:
            deadletter.bury(job, reason=retry.ABANDONED, exc_string=message, worker_name=worker_name)
            limits.release(job)  # dead: its limit key's slot goes to the next held job (a retry frees it itself)
            self.counts["dead"] += 1

    def _forget(self, queue_name, job_id, execution_id, worker_name):
        with self.connection.pipeline() as pipe:
            forget_execution(pipe, queue_name, job_id, execution_id, worker_name)
            pipe.execute()

    # -- intermediate lists -----------------------------------------------------------------
    def intermediate(self, name, started_ids):
        queue_key = keys.queue_key(name)
        list_key = keys.intermediate_key(queue_key)
        ids = set(self._text_entries(list_key, self.connection.lrange(list_key, 0, LIMIT - 1)))
        seen_key = keys.intermediate_seen_key(name)
        seen = self._seen(seen_key)
        seconds, micros = self.connection.time()  # Redis's clock: scanners on other hosts compare with it
        now = seconds + micros / 1e6
        keep = {}
        for job_id in ids:
            if job_id in started_ids:
                continue
            first = seen.get(job_id)
            if first is None or now - first < self.stale_after:
                keep[job_id] = first if first is not None else now
                continue
            if not self.connection.exists(keys.job_key(job_id)):
                self.connection.lrem(keys.intermediate_key(queue_key), 1, job_id)
                self.counts["dropped"] += 1
            elif give_back(self.connection, queue_key, job_id, jobmeta.PUT_BACK_ABANDONED):
                self.counts["requeued"] += 1
                self.log.warning(
                    "Job %s was popped from %s by a worker that never started it: back at the head", job_id, name
                )
        with self.connection.pipeline() as pipe:
            pipe.delete(seen_key)
            if keep:
                pipe.hset(seen_key, mapping=keep)
                pipe.expire(seen_key, 24 * 3600)
            pipe.execute()

    def _seen(self, key):
        """When the scan first saw each popped id; an entry that is no id and time (written by something
        else) is left out with an ERROR naming the key: the scan writes the hash anew."""
        seen = {}
        for field, value in self.connection.hgetall(key).items():
            try:
                seen[as_text(field)] = float(value)
            except (UnicodeDecodeError, ValueError):
                self.log.error("Abandoned-job scan: skipped entry %r of %s: not a job id and a time", field[:200], key)
        return seen

    # -- RQ's worker registry ---------------------------------------------------------------
    def dead_workers(self):
        prefix = keys.worker_key("")
        registered = self._text_entries(REDIS_WORKER_KEYS, self.connection.smembers(REDIS_WORKER_KEYS))
        names = [k[len(prefix) :] for k in registered if k.startswith(prefix)]
        alive = live_workers(self.connection, names)
        for name in names:
            if name in alive:
                continue
            key = prefix + name
            mark, death, queues = self.connection.hmget(key, LIVENESS_MARK, "death", "queues")
            if not mark or death:
                continue  # not an OptimaWorker, or it said goodbye (rq expires it)
            with self.connection.pipeline() as pipe:
                pipe.srem(REDIS_WORKER_KEYS, key)
                for queue_name in as_text(queues or b"").split(","):
                    if queue_name:
                        pipe.srem(WORKERS_BY_QUEUE_KEY % queue_name, key)
                pipe.delete(key, keys.worker_executions_key(name))
                pipe.execute()
            self.counts["workers_removed"] += 1
            self.log.warning("Worker %s died without unregistering: removed from the worker registry", name)


def scan_if_due(connection, queue_names, *, interval, stale_after, log=logger):
    """Run a Scan unless another worker ran one in the last ``interval`` seconds. Returns the counts,
    or None when it was not this worker's turn."""
    if not connection.set(keys.scan_lock_key(), uuid.uuid4().hex, nx=True, ex=max(1, int(interval))):
        return None
    counts = Scan(connection, queue_names, stale_after=stale_after, log=log).run()
    if any(counts.values()):
        log.info("Abandoned-job scan: %s", ", ".join(f"{k} {v}" for k, v in counts.items() if v))
    return counts
