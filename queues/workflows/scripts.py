"""The batch's Lua: every change of its counts and the decision to fire a callback, in one atomic call.

Each script takes the batch's keys (``keys``) and runs alone in Redis, so two members finishing at the
same instant on two workers are counted one after the other, and exactly one of them sees the batch
complete. A member is counted by adding its id to a set (``done``, ``dead``): SADD answers whether this is
its first count, so a member that runs again (a SIGKILL after its work, before its success was recorded)
is counted once. Firing a callback is only pushing the id of a job made (signed) when the batch was
opened: its hash waits with the status ``deferred`` in no queue; ``fired_<kind>`` is set with HSETNX in
the same call, so a callback is pushed at most once, and since the push is in the call that decided it,
never lost between the decision and the enqueue (docs/workflows.md, "Exactly once").

The hash ``<p>:optima:batch:<id>`` holds ``state``, ``created_at``, ``finished_at`` (unix seconds), ``ttl``
(seconds its keys outlive its end), ``label`` (the queue of its callback, for /metrics), ``qs`` (rq's set
of queues), and per callback kind (``success``, ``complete``, ``death``) ``cb_<kind>`` (the job id),
``jk_<kind>`` (its hash), ``qk_<kind>`` (its queue's list) and, once decided, ``fired_<kind>`` (when,
or ``never``); once succeeded, its counts (``total``, ``finished``, ``dead``: its sets are dropped then);
``dead_ttl`` (the longest retention of its dead members' dead letters, -1: none) and, for a chain's step,
``chain_key``: a batch completed with dead members expires with its dead letters (``keep_while_dead``).
A succeeded or canceled batch counts nothing more. Its sets: ``members``, ``done``, ``dead``, ``adders``
(``block`` while the ``with`` block is open; a running member's id while it may add members:
``queues.current_batch()``), ``canceled``.

The keys of a callback's job and queue are read from the hash, not declared: fine on one Redis and on
Sentinel, what this project runs (as ``connection/batch.py``).
"""

COMMON = """
local H, M, D, X, A, C, COUNTS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local function move(from, to)
  local label = redis.call('HGET', H, 'label') or ''
  if from then redis.call('HINCRBY', COUNTS, label .. '|' .. from, -1) end
  redis.call('HINCRBY', COUNTS, label .. '|' .. to, 1)
  redis.call('HSET', H, 'state', to)
end
local function fire(kind, now_iso)
  local id = redis.call('HGET', H, 'cb_' .. kind)
  if not id then return end
  if redis.call('HSETNX', H, 'fired_' .. kind, now_iso) == 0 then return end
  local jk = redis.call('HGET', H, 'jk_' .. kind)
  if redis.call('EXISTS', jk) == 0 then return end
  local qk = redis.call('HGET', H, 'qk_' .. kind)
  redis.call('PERSIST', jk)  -- it may have been given the retention of a batch completed with dead members
  redis.call('HSET', jk, 'status', 'queued', 'enqueued_at', now_iso)
  redis.call('SADD', redis.call('HGET', H, 'qs'), qk)
  redis.call('RPUSH', qk, id)
end
local function expire_all()
  local ttl = tonumber(redis.call('HGET', H, 'ttl') or '86400')
  for _, key in ipairs({H, M, D, X, A, C}) do redis.call('EXPIRE', key, ttl) end
  return ttl
end
local function keep_while_dead()
  -- Completed with dead members: its keys (and its callbacks' waiting jobs, its chain's hash) are kept as long as
  -- its dead letters are (the longest failure_ttl of its dead members, from the last death), at least ``ttl``.
  local keep = tonumber(redis.call('HGET', H, 'dead_ttl') or '-1')
  if keep < 0 then return end
  keep = math.max(keep, tonumber(redis.call('HGET', H, 'ttl') or '0'))
  for _, key in ipairs({H, M, D, X, A, C}) do redis.call('EXPIRE', key, keep) end
  for _, kind in ipairs({'success', 'complete', 'death'}) do
    local jk = redis.call('HGET', H, 'jk_' .. kind)
    if jk and not redis.call('HGET', H, 'fired_' .. kind) then redis.call('EXPIRE', jk, keep) end
  end
  local ck = redis.call('HGET', H, 'chain_key')
  if ck then redis.call('EXPIRE', ck, keep) end
end
local function never(kind, ttl)
  local id = redis.call('HGET', H, 'cb_' .. kind)
  if id and redis.call('HSETNX', H, 'fired_' .. kind, 'never') == 1 then
    local jk = redis.call('HGET', H, 'jk_' .. kind)
    if redis.call('EXISTS', jk) == 1 then
      redis.call('HSET', jk, 'status', 'canceled')
      redis.call('EXPIRE', jk, ttl)
    end
  end
end
local function take_over(new, old)
  -- A dead letter retried as a new job (its old one had left Redis: ``meta.retry_of``) is the member in its place.
  if not old or old == '' or old == new or redis.call('SISMEMBER', M, old) == 0 then return end
  redis.call('SREM', M, old)
  redis.call('SREM', X, old)
  redis.call('SADD', M, new)
end
local function settle(now_iso, now_ts)
  local state = redis.call('HGET', H, 'state')
  if not state or state == 'canceled' or state == 'succeeded' then return state or '' end
  if redis.call('SCARD', A) > 0 then return state end
  local total = redis.call('SCARD', M)
  local dead = redis.call('SCARD', X)
  if redis.call('SCARD', D) + dead < total then return state end
  local new = 'completed_with_dead'
  if dead == 0 then
    new = 'succeeded'
    fire('success', now_iso)
  end
  fire('complete', now_iso)
  if new ~= state then move(state, new) end
  redis.call('HSETNX', H, 'finished_at', now_ts)
  if new == 'completed_with_dead' then keep_while_dead() end
  if new == 'succeeded' then
    -- Nothing changes a succeeded batch: its counts are frozen in the hash and its sets dropped now, so that
    -- a run of many batches leaves memory flat (bench/batches.py); the hash expires with the retention.
    redis.call('HSET', H, 'total', total, 'finished', total, 'dead', 0)
    redis.call('DEL', M, D, X, A)
    never('death', expire_all())
  end
  return new
end
"""

# A member's success, in the MULTI that records it (``hook.py``). ARGV: job id, now (rq's ISO), now (unix), and the
# id of the dead member it is the retry of when it is a dead letter retried as a new job ('' otherwise).
SUCCESS = (
    COMMON
    + """
local state = redis.call('HGET', H, 'state')
if not state or state == 'succeeded' or state == 'canceled' then return state or '' end
take_over(ARGV[1], ARGV[4])
if redis.call('SADD', D, ARGV[1]) == 0 then return '' end
redis.call('SREM', X, ARGV[1])
redis.call('SREM', A, ARGV[1])
return settle(ARGV[2], ARGV[3])
"""
)

# A member dead-lettered (``hook.py``, with or after its burial). ARGV: as SUCCESS, then the dead letter's retention
# (the job's failure_ttl in seconds, -1: no expiry), which the batch keeps as ``dead_ttl`` (the longest).
DEAD = (
    COMMON
    + """
local state = redis.call('HGET', H, 'state')
if not state or state == 'succeeded' or state == 'canceled' then return state or '' end
take_over(ARGV[1], ARGV[4])
if redis.call('SISMEMBER', D, ARGV[1]) == 1 then return '' end
if redis.call('SADD', X, ARGV[1]) == 0 then return '' end
local retention, kept = tonumber(ARGV[5] or '-1') or -1, redis.call('HGET', H, 'dead_ttl')
if retention < 0 or kept == '-1' then
  redis.call('HSET', H, 'dead_ttl', -1)
elseif not kept or tonumber(kept) < retention then
  redis.call('HSET', H, 'dead_ttl', retention)
end
redis.call('SREM', A, ARGV[1])
if redis.call('HGET', H, 'state') ~= 'canceled' then fire('death', ARGV[2]) end
return settle(ARGV[2], ARGV[3])
"""
)

# An adder leaves: the ``with`` block closed (token ``block``), or a running member's
# ``current_batch()`` block (its job id). The members it enqueued were added in the same MULTI.
SEAL = (
    COMMON
    + """
if redis.call('EXISTS', H) == 0 then return '' end
redis.call('SREM', A, ARGV[1])
if redis.call('HGET', H, 'state') == 'open' and redis.call('SISMEMBER', A, 'block') == 0 then
  move('open', 'running')
end
return settle(ARGV[2], ARGV[3])
"""
)

# A running member opens ``current_batch()``: the batch is not complete until it closes. ARGV: job id.
ADDER = (
    COMMON
    + """
local state = redis.call('HGET', H, 'state')
if not state then return '' end
if state ~= 'succeeded' and state ~= 'canceled' then redis.call('SADD', A, ARGV[1]) end
return state
"""
)

# ``cancel_batch``: -> {outcome, member ids not yet counted...}. ARGV: now (rq's ISO), now (unix).
CANCEL = (
    COMMON
    + """
local state = redis.call('HGET', H, 'state')
if not state then return {'gone'} end
if state == 'succeeded' or state == 'completed_with_dead' or state == 'canceled' then return {state} end
move(state, 'canceled')
redis.call('HSETNX', H, 'finished_at', ARGV[2])
local ttl = expire_all()
for _, kind in ipairs({'success', 'complete', 'death'}) do never(kind, ttl) end
local left = redis.call('SDIFF', M, D, X)
table.insert(left, 1, 'canceled')
return left
"""
)

# Members joining, before the SEAL of their adder in the same MULTI (at most ``JOIN_CHUNK`` ids a call). KEYS: the
# hash, ``members``, ``canceled``: a member that left before it joined (canceled, or never written: LEAVE) does not.
JOIN = """
local state = redis.call('HGET', KEYS[1], 'state')
if not state or state == 'succeeded' or state == 'canceled' then return 0 end
local added = 0
for _, id in ipairs(ARGV) do
  if redis.call('SISMEMBER', KEYS[3], id) == 0 then added = added + redis.call('SADD', KEYS[2], id) end
end
return added
"""
JOIN_CHUNK = 1000

# A member canceled on its own (``queues.cancel``) before it started, or accepted and never written (the duplicate
# of a unique key's job still waiting at the commit): it leaves the batch, which no longer waits for it (it is
# counted in ``canceled``). Before its adder's seal (the commit's order: the push, then the join) it is only noted
# in ``canceled``, and JOIN leaves it out. ARGV: as SUCCESS.
LEAVE = (
    COMMON
    + """
local state = redis.call('HGET', H, 'state')
if not state or state == 'succeeded' or state == 'canceled' then return state or '' end
if redis.call('SISMEMBER', D, ARGV[1]) == 1 or redis.call('SISMEMBER', X, ARGV[1]) == 1 then return '' end
redis.call('SREM', M, ARGV[1])
if redis.call('SADD', C, ARGV[1]) == 0 then return '' end
return settle(ARGV[2], ARGV[3])
"""
)
