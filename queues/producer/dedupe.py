"""Debounce and throttle: deduplication by a key beside ``unique=`` (issue 35 §1).

- ``debounce_key=K, debounce_seconds=S[, debounce_max_seconds=M]`` (trailing edge): the first enqueue of a
  window writes a job scheduled S seconds ahead; each later enqueue with K, while that job is still
  scheduled, swaps in its own arguments (the job hash's ``data``, re-signed for the pending job's id) and
  moves the start to S seconds from now, but never past M seconds after the window's first enqueue. The
  job runs once, with the last arguments Redis applied. Once it is due (the scheduler moves it to its queue,
  a worker starts it), the next enqueue starts a new window: while one runs, the key's one pending job
  holds the latest arguments (BullMQ's keep-last-if-active).
- ``throttle_key=K, throttle_seconds=S`` (leading edge): the first enqueue writes its job as usual; the
  others within S seconds write nothing and are answered with that job.

Every enqueue with a key is one Lua call (``DEDUPE_LUA``), so 200 enqueues from 8 processes leave one job.
The job's signed fields are built in Python (queues/jobs/signing.py: the signature covers the job id), so
a replacement is signed for the id this process last saw pending under the key; the script swaps it in
only if the key still points at that job (check and set), else answers with the pending id, and the
enqueue signs for it and calls again. The new job's own write (``write.batch_into``: hash, schedule,
search index) is queued on a pipeline that is never executed: the script replays its commands when it
opens a window (queues/connection/batch.py encodes commands the same way), so a window opens in the same
single call. When this process expects to replace (it saw the key's pending job last), that write is not
even built: the script asks for it (outcome 3) only if the window closed meanwhile. In the steady state
(one process editing) an enqueue with a key costs one round trip, as a plain one does, and about half its
time (bench/debounce.py).

Nothing is added to the worker: the window closes when the job leaves the scheduled registry (before it
starts), which the script reads with the ZSCORE it needs anyway.

With ``limit_key``: the job is written scheduled as any debounced job, and the RQ scheduler moves it through
its limit when it is due — with ``limit_rate`` into its rate's hold (queues/periodic/supervision.py
``move_own_due_jobs``), with a concurrency alone through rq's. It leaves the scheduled registry then, so
the window closes when it is *held*, not when it starts: an edit while it waits held opens the next window
(a second job, the new arguments), and the held one runs with what it had. A throttle with a limit key is
refused when it would start now (``check``: its write is this one script, the limit's hold another).

A job that ran and waits in the scheduled registry for a retry is no pending job: the next enqueue opens a
window. A pending job is replaced only while it is due more than ``MARGIN_SECONDS`` ahead (Redis' clock): rq's
scheduler reads a due job's hash and writes it back whole when it moves it, so a swap in that moment would
be lost. An enqueue in the last second of a window opens the next window instead: the pending job runs
with what it had, the new one runs S seconds later with the new arguments.

Written at once, even inside ``transaction.atomic()``: the answer (the pending job) is Redis' state now,
so there is no outbox path (``durable=True`` is refused).
"""

import copy
import math
from dataclasses import dataclass

import redis
from rq.job import JobStatus

from queues import rqcompat
from queues.connection.clients import unavailable
from queues.exceptions import InvalidJob
from queues.jobs import signing
from queues.keyspace import keys, quarantine
from queues.producer import limits
from queues.producer.write import batch_into, written_keys  # the job's write, replayed by the script

MARGIN_SECONDS = 1.0  # a pending job due sooner than this is left to the scheduler (its move rewrites the hash)
KEY_TTL_EXTRA = 3600  # seconds a debounce key outlives its window's latest possible start
MAX_TRIES = 20  # check-and-set rounds before giving up (each lost round means another process replaced first)

DEDUPE_LUA = """
local mode, new_id, guess = ARGV[1], ARGV[2], ARGV[3]
local seconds, max_seconds, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local data, signature, description = ARGV[7], ARGV[8], ARGV[9]
local job_prefix, scheduled, margin = ARGV[10], ARGV[11], tonumber(ARGV[12])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local pending = redis.call('HGET', KEYS[1], 'job')
if mode == 'throttle' then
  if pending then return {1, pending} end
else
  if pending then
    local score = redis.call('ZSCORE', scheduled, pending)
    -- started_at: the job ran and waits for a retry (rq writes it at each start): not the window's to replace
    if score and tonumber(score) > now + margin and redis.call('HEXISTS', job_prefix .. pending, 'started_at') == 0 then
      if pending ~= guess then return {0, pending} end
      local due = now + seconds
      local first = tonumber(redis.call('HGET', KEYS[1], 'first')) or now
      if max_seconds > 0 and first + max_seconds < due then due = first + max_seconds end
      due = math.ceil(due)
      local job_key = job_prefix .. pending
      local meta = redis.call('HGET', job_key, 'meta')
      if meta then  -- its due time for the wait histograms (queues/jobs/meta.py DUE_AT; JSON, the key is the app's)
        meta = string.gsub(meta, '"due_at": [%d%.e%+%-]+', '"due_at": ' .. string.format('%d', due), 1)
        redis.call('HSET', job_key, 'meta', meta)
      end
      redis.call('HSET', job_key, 'data', data, 'signature', signature, 'description', description)
      redis.call('ZADD', scheduled, 'XX', due, pending)
      redis.call('EXPIRE', KEYS[1], ttl)
      return {1, pending, due}
    end
  end
end
local i, n = 13, #ARGV
if n < i then return {3, ''} end  -- sent without the new job's write (a replacement was expected): ask for it
while i <= n do
  local argc = tonumber(ARGV[i])
  redis.call(unpack(ARGV, i + 1, i + argc))
  i = i + argc + 1
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'job', new_id, 'first', tostring(now))
if mode == 'throttle' then
  redis.call('PEXPIRE', KEYS[1], math.ceil(seconds * 1000))
else
  redis.call('EXPIRE', KEYS[1], ttl)
end
return {2, new_id}
"""

_scripts: dict[int, "redis.commands.core.Script"] = {}  # id(connection) -> its Script
_last_pending: dict[tuple[str, str], str] = {}  # (queue, key) -> the pending id this process last saw


@dataclass(frozen=True)
class Plan:
    """A validated debounce or throttle request (``check``)."""

    mode: str  # "debounce" or "throttle"
    key: str
    seconds: float
    max_seconds: float | None = None


def _seconds(option, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidJob(
            f"{option} must be a number of seconds > 0, got {type(value).__name__} {value!r}. Pass e.g. {option}=30."
        )
    return float(value)


def _key(option, value):
    problem = limits.key_problem(value) if isinstance(value, str) else f"is a {type(value).__name__}, not a string"
    if problem:
        raise InvalidJob(
            f"{option}={value!r} {problem}. Pass a short key naming what is deduplicated, e.g. {option}='product-42'."
        )
    return value


def check(
    *,
    debounce_key=None,
    debounce_seconds=None,
    debounce_max_seconds=None,
    throttle_key=None,
    throttle_seconds=None,
    unique=None,
    when=None,
    durable=False,
    job_id=None,
    limit_key=None,
):
    """Validate the options; -> a ``Plan``, or None when none of them is given. Each refusal names the
    option, the value and the fix (``InvalidJob``)."""
    debounce = (debounce_key, debounce_seconds, debounce_max_seconds) != (None, None, None)
    throttle = (throttle_key, throttle_seconds) != (None, None)
    if not debounce and not throttle:
        return None
    if debounce and throttle:
        raise InvalidJob(
            f"debounce_key={debounce_key!r} with throttle_key={throttle_key!r}: a job is debounced (runs once, "
            "last arguments, after the edits stop) or throttled (runs at once, later ones dropped), not both. "
            "Drop one of them."
        )
    option = "debounce_key" if debounce else "throttle_key"
    given = debounce_key if debounce else throttle_key
    if unique not in (None, False):
        raise InvalidJob(
            f"{option}={given!r} with unique={unique!r}: the key already makes the job unique within its "
            "window. Drop unique."
        )
    if durable is True:
        raise InvalidJob(
            f"{option}={given!r} with durable=True: a debounced or throttled enqueue is written to Redis at "
            "once (the pending job it answers with is Redis' state now), never through the outbox. Drop durable."
        )
    if job_id is not None:
        raise InvalidJob(
            f"{option}={given!r} with job_id={job_id!r}: the window's job keeps the id of its first enqueue, "
            "so an own id cannot be honoured. Drop job_id (the returned job's id is the one that runs)."
        )
    if debounce:
        if debounce_key is None or debounce_seconds is None:
            raise InvalidJob(
                f"debounce needs both debounce_key and debounce_seconds (got debounce_key={debounce_key!r}, "
                f"debounce_seconds={debounce_seconds!r}). Pass e.g. debounce_key='product-42', debounce_seconds=30."
            )
        if when is not None:
            raise InvalidJob(
                f"debounce_key={debounce_key!r} with delay or at: a debounced job starts debounce_seconds after "
                "the last enqueue of its window. Drop delay/at."
            )
        seconds = _seconds("debounce_seconds", debounce_seconds)
        max_seconds = None
        if debounce_max_seconds is not None:
            max_seconds = _seconds("debounce_max_seconds", debounce_max_seconds)
            if max_seconds < seconds:
                raise InvalidJob(
                    f"debounce_max_seconds={debounce_max_seconds!r} is less than debounce_seconds="
                    f"{debounce_seconds!r}: the bound on the wait cannot be shorter than the wait itself. "
                    f"Pass debounce_max_seconds >= {debounce_seconds!r}, or leave it out (no bound)."
                )
        return Plan("debounce", _key("debounce_key", debounce_key), seconds, max_seconds)
    if throttle_key is None or throttle_seconds is None:
        raise InvalidJob(
            f"throttle needs both throttle_key and throttle_seconds (got throttle_key={throttle_key!r}, "
            f"throttle_seconds={throttle_seconds!r}). Pass e.g. throttle_key='sync-7', throttle_seconds=60."
        )
    if limit_key is not None and when is None:
        raise InvalidJob(
            f"throttle_key={throttle_key!r} with limit_key={limit_key!r}: a throttled job is written in one "
            "script, and a limit key's hold (its concurrency or its rate) is a script of its own, which a script "
            "cannot call. Drop limit_key, or debounce instead (a debounced job starts later and goes through its "
            "limit and its rate then)."
        )
    return Plan("throttle", _key("throttle_key", throttle_key), _seconds("throttle_seconds", throttle_seconds))


def _script(connection):
    script = _scripts.get(id(connection))
    if script is None or script.registered_client is not connection:
        script = _scripts[id(connection)] = connection.register_script(DEDUPE_LUA)
    return script


def place(queue, job, when, plan):
    """Write the built, signed ``job`` under ``plan``'s key (one Lua call, more only when another process
    replaced the pending job since this one last saw it). -> ``job`` itself when it opened a window, else a
    Job for the id that will run (the pending one), holding what it will run with (a debounce) or ``job``'s
    arguments with the id of the job that runs (a throttle: what runs is that job's own)."""
    connection = queue.connection
    cache_key = (queue.name, plan.key)
    dedupe_key = keys.dedupe_key(queue.name, plan.mode, plan.key)
    ttl = math.ceil((plan.max_seconds or plan.seconds) + KEY_TTL_EXTRA)
    data, description = job.data, job.description
    guess = _last_pending.get(cache_key, "") if plan.mode == "debounce" else ""
    # Expecting to replace the pending job this process saw last, the call goes without the new job's write
    # (the script asks for it, outcome 3, when the window has closed meanwhile).
    replay = [] if guess else _replay(queue, job, when)
    try:
        for _ in range(MAX_TRIES):
            signature = _signature_for(job, guess) if guess else ""
            argv = [
                plan.mode,
                job.id,
                guess,
                plan.seconds,
                plan.max_seconds or 0,
                ttl,
                data,
                signature,
                description or "",
                _text(keys.job_key("")),
                keys.scheduled_key(queue.name),
                MARGIN_SECONDS,
                *replay,
            ]
            # A key of another type (planted by whoever writes to Redis) is set aside and the call made once
            # more: every write of the script is idempotent, so what it applied before the error is no harm.
            reply = quarantine.retry_once(
                connection,
                lambda guess=guess: {
                    dedupe_key: "hash",
                    **({_text(keys.job_key(guess)): "hash"} if guess else {}),
                    **written_keys(queue, job, None),
                },
                lambda argv=argv: _script(connection)(keys=[dedupe_key], args=argv),
                who=f"Enqueue of job {job.id}",
            )
            outcome, holder = int(reply[0]), _text(reply[1])
            if outcome == 0:  # another pending job than the one signed for: sign for it, try again
                guess = holder
                continue
            if outcome == 3:  # no job to replace after all: open the window with the new job's write
                replay = _replay(queue, job, when)
                continue
            _remember(cache_key, holder if plan.mode == "debounce" else None)
            if outcome == 2:
                return job
            if plan.mode == "throttle":  # the job that runs is another one, with its own arguments
                return queue.fetch_job(holder) or _answer(job, holder, None, queue.name)
            return _answer(job, holder, signature, queue.name)
    except redis.RedisError as exc:
        raise unavailable(exc, connection=queue.connection) from exc
    raise InvalidJob(
        f"{plan.mode}_key={plan.key!r}: the pending job was replaced by other enqueues {MAX_TRIES} times in a "
        "row while this one tried to; retry the enqueue."
    )


def _replay(queue, job, when):
    """The commands of ``job``'s write (``write.batch_into``: hash, schedule, search index), encoded for the
    script as queues/connection/batch.py encodes them (each command's argument count, then its arguments)."""
    with queue.connection.pipeline() as recorder:  # never executed: its commands are replayed by the script
        batch_into(queue, [job], when, recorder)
        commands = [args for args, _options in recorder.command_stack]
        recorder.reset()
    replay = []
    for args in commands:
        replay.append(len(args))
        replay.extend(args)
    return replay


def _signature_for(job, job_id):
    """The signature of ``job``'s data and callbacks under another id (the pending job's)."""
    return signing._sign_bytes(signing._message(job_id, job.data, signing.callbacks_of(job)))


def _answer(job, holder, signature, origin):
    """``job`` (built, never written) renamed to the pending ``holder``: its id, and for a debounce the
    signature the pending job now carries, so the caller holds the job that will run."""
    answer = copy.copy(job)  # another object: the caller tells a new job from a pending one by identity
    answer.id = holder
    answer.origin = origin
    rqcompat.set_status_in_hash(answer, JobStatus.SCHEDULED)  # what the pending job is (``get_status``)
    if signature:
        answer.signature = signature
    return answer


def _remember(cache_key, holder):
    if holder is None:
        return
    if len(_last_pending) > 10_000:
        _last_pending.clear()
    _last_pending[cache_key] = holder


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)
