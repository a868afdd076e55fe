"""Cancel of a job not yet started (the panel's Cancel, ``DELETE /jobs/<id>/``), or of a running long job.

A queued, scheduled (delayed, or a retry waiting for its backoff) or held job (held back by its
limit key, queues/producer/limits.py) ends ``canceled`` and never runs. One Lua script decides against the
worker's pop, so a job a worker took a moment before is refused ("already running: stop it
instead"), never both run and reported canceled; the worker's gate drops a ``canceled`` job it
still finds in a queue (``gate.vet``). A held job leaves its key's held set in the same script (rq's
promotion only ever pushes a job whose status is still ``rate_limited``, so the two cannot cross);
a canceled queued job of a limit key then gives its slot to the next held job of the key.
(The outbox's rows not yet pushed are the outbox's: queues/producer/outbox.py.)

A running job that wrote a checkpoint (issue 34: a long job, ``queues.current_job().checkpoint``) is asked to
stop instead: the same script marks its hash (``resume.CANCEL_REQUESTED``), the job reads the mark at its next
checkpoint, and its worker ends it ``canceled`` (outcome ``canceling``). Any other running job is refused.
"""

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rq.registry import CanceledJobRegistry, ScheduledJobRegistry

from queues import audit
from queues.catalog.lookup import get_queue, job_connection, queue_names
from queues.events import hooks
from queues.jobs import meta as jobmeta
from queues.jobs import read as jobread
from queues.jobs import resume
from queues.keyspace import keys, quarantine
from queues.producer import limits, outbox, rates

if TYPE_CHECKING:
    import redis
    from django.http import HttpRequest

# Atomic against the worker's pop (an LMOVE of the queue's head into its intermediate list,
# worker/dequeue.py) and the scheduler's move of a due job: the job is canceled only while
# its id is still in its queue's list, or in the scheduled registry and not yet due; otherwise the
# worker (or the scheduler) has it and the answer says so. KEYS: job hash, queue list,
# intermediate list, scheduled registry, canceled registry, and for a job with a limit key its key's
# held sets: rq's ``rate_limited`` zset (a concurrency) and the rate's (a rate, or a paused key): a held job
# leaves whichever it is in. ARGV: id, "due before" (unix s), now, and the hash field of a cancel
# request (issue 34: a running long job that wrote a checkpoint, ``meta.cursor``, stops at its next one and ends
# canceled: ``queues/jobs/resume.py``, ``CANCEL_REQUESTED``). A key of another type
# than rq's (planted) is named before anything is written: {'wrongtype', key}.
CANCEL_LUA = """
local types = {'list', 'list', 'zset', 'zset', 'zset', 'zset', 'zset'}
for i = 2, #KEYS do
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= types[i - 1] then return {'wrongtype', KEYS[i]} end
end
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  if redis.call('EXISTS', KEYS[1]) == 0 then return {'gone', ''} end
  return {'refused', ''}
end
if status == 'rate_limited' and KEYS[6] then
  for i = 6, #KEYS do redis.call('ZREM', KEYS[i], ARGV[1]) end
  redis.call('HSET', KEYS[1], 'status', 'canceled')
  redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
  return {'canceled', 'held'}
end
if status == 'started' and ARGV[4] then
  local ok, meta = pcall(cjson.decode, redis.call('HGET', KEYS[1], 'meta') or '')
  if ok and type(meta) == 'table' and meta['cursor'] ~= nil then
    redis.call('HSET', KEYS[1], ARGV[4], ARGV[3])
    return {'canceling', status}
  end
end
if status ~= 'queued' and status ~= 'scheduled' then return {'refused', status} end
if redis.call('LPOS', KEYS[3], ARGV[1]) then return {'taken', status} end
if not redis.call('LPOS', KEYS[2], ARGV[1]) then
  local score = redis.call('ZSCORE', KEYS[4], ARGV[1])
  if not score then return {'taken', status} end
  if tonumber(score) <= tonumber(ARGV[2]) then return {'due', status} end
end
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HSET', KEYS[1], 'status', 'canceled')
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
return {'canceled', status}
"""

# A scheduled job due within this many seconds may already be in a scheduler's hands (rq reads the
# due ids, then moves them in a second round trip): it is not canceled, the answer says to retry.
DUE_MARGIN_SECONDS = 2


@dataclass(frozen=True)
class Canceled:
    """What ``cancel_job`` did: ``outcome`` is ``canceled``, ``canceling`` (a running long job that wrote a
    checkpoint: it stops at its next one and ends canceled; ``ok`` too), ``gone`` (no such job), or a refusal:
    ``running`` (a worker has it), ``due`` (a scheduler is moving it), ``ended`` (finished,
    failed, stopped, already canceled, deferred, or corrupt). ``state``: the job's state now."""

    outcome: str
    state: str
    detail: str

    @property
    def ok(self) -> bool:
        return self.outcome in ("canceled", "canceling")


def cancel_job(job_id: str, connection: "redis.Redis | None" = None) -> Canceled:
    """Cancel a queued, scheduled (delayed, or a retry waiting for its backoff) or held job, atomically
    (``CANCEL_LUA``): it ends ``canceled`` in the canceled registry and never runs. Returns a
    ``Canceled``; never raises but for Redis being unavailable (``redis.RedisError``)."""
    connection = connection or job_connection(job_id)  # the job's own server (QUEUES_REDIS_SERVERS)
    job = jobread.fetch(job_id, connection, check_origin=False)
    if job is None:
        return Canceled("gone", "", f"no job {job_id!r} in Redis (never there, deleted, or expired)")
    if jobread.is_corrupt(job):
        return Canceled("ended", "corrupt", f"job {job_id} is corrupt ({job.why}): nothing to cancel; delete it")
    queue_key = get_queue(job.origin, connection=connection).key if job.origin in queue_names() else None
    if queue_key is None:
        return Canceled("ended", "corrupt", f"job {job_id} names queue {job.origin!r}, which is not declared")
    now = time.time()
    script = connection.register_script(CANCEL_LUA)
    # The job's own band of its queue (``priority=``): the list it waits in when it is queued.
    script_keys = [
        job.key,
        keys.band_key(queue_key, jobmeta.band(job)),
        keys.intermediate_key(queue_key),
        ScheduledJobRegistry(job.origin, connection=connection).key,
        CanceledJobRegistry(job.origin, connection=connection).key,
    ]
    limited = limits.is_limited(job)
    if limited:  # held by its concurrency (rq's held set), or by its rate or a pause (the rate's)
        script_keys += [keys.limit_held_key(job.rate_limit_key), rates.held_key(job.rate_limit_key)]
    elif rates.of(job) is not None:  # held by its rate alone: its key's held set of queues/producer/rates.py
        script_keys.append(rates.held_key(rates.of(job)[0]))
    reply = script(keys=script_keys, args=[job.id, now + DUE_MARGIN_SECONDS, now, resume.CANCEL_REQUESTED])
    if jobread.text(reply[0]) == "wrongtype":  # renamed aside (queues.keyspace.quarantine), then once more
        types = dict(zip(script_keys[1:], ("list", "list", "zset", "zset", "zset", "zset", "zset")))
        quarantine.set_aside(connection, types, who=f"Cancel of job {job.id}")
        reply = script(keys=script_keys, args=[job.id, now + DUE_MARGIN_SECONDS, now, resume.CANCEL_REQUESTED])
    outcome, was = (jobread.text(r) for r in reply)
    if outcome == "canceled":
        if limited and was == "queued":
            limits.release(job)  # its slot goes to the next held job of its key
        what = "held back by its limit key" if was == "held" else was
        return Canceled("canceled", "canceled", f"canceled (it was {what}); it will not run")
    if outcome == "canceling":
        return Canceled(
            "canceling",
            "started",
            "asked to stop: it is running and stops at its next checkpoint, then ends canceled (a long job; the "
            "items it has done stay done)",
        )
    if outcome == "gone":
        return Canceled("gone", "", f"no job {job_id!r} in Redis (deleted or expired meanwhile)")
    if outcome == "taken":
        return Canceled("running", "started", f"job {job_id} is already running (a worker took it): stop it instead")
    if outcome == "due":
        return Canceled(
            "due", was, f"job {job_id} is due now and being moved to its queue: cancel it again in a few seconds"
        )
    if was == "started":
        return Canceled("running", was, f"job {job_id} is already running (a worker took it): stop it instead")
    return Canceled(
        "ended",
        was or "unknown",
        f"job {job_id} is already {was or 'without a status'}: only a queued or scheduled job can be canceled",
    )


def cancel(
    job_id: str, *, request: "HttpRequest | None" = None, reason: str = "", connection: "redis.Redis | None" = None
) -> Canceled:
    """``queues.cancel``: cancel a job that has not started, wherever it is; -> ``Canceled``.

    A job still in the outbox (accepted, not yet in Redis) is canceled by deleting its row
    (``outcome`` ``busy`` while a pusher is writing it to Redis: try again); any other goes through
    ``cancel_job``. With ``request``, the attempt is audited (``queues.audit``) as ``"<reason>: <what
    happened>"``, naming the job's queue. Raises ``redis.RedisError`` when Redis is unavailable and the
    outbox does not hold the job; nothing is audited then."""
    entry = outbox.waiting(job_id)
    if entry is not None:
        if outbox.cancel(job_id):
            result = Canceled("canceled", "canceled", "deleted from the outbox before it reached Redis")
        else:
            result = Canceled("busy", "outbox", "not canceled, it is being written to Redis right now")
        queue = entry.queue
        meta = outbox.stored_meta(entry) if result.ok else {}
    else:
        connection = connection or job_connection(job_id)
        job = jobread.fetch(job_id, connection, check_origin=False)
        queue = getattr(job, "origin", "") or ""
        result = cancel_job(job_id, connection=connection)
        meta = job.meta if result.ok and job is not None and isinstance(getattr(job, "meta", None), dict) else {}
    if result.ok:
        hooks.after_cancel(job_id, meta)  # e.g. its batch stops waiting for it (queues/workflows/)
    if request is not None and result.outcome != "gone":
        audit.record(
            request,
            "cancel",
            queue,
            [job_id],
            "ok" if result.ok else "error",
            f"{reason}: {result.detail}" if reason else result.detail,
        )
    return result
