"""The Lua of rate limits per key (queues/producer/rates.py): release a key's held jobs as its budget allows;
pause a key and hold the jobs of a paused key.

GCRA per key (``tat``: the theoretical arrival time of its next job); one step of tolerance. A released job
goes onto its queue (its status ``queued``, as rq's promotion Lua writes it), or, when it also has rq's
concurrency fields, into rq's held set of the same scoped key, then rq's promotion runs inline. A key left
with held jobs is scored in the due zset by when its next token comes, which the RQ scheduler's ``rates.wait``
sleeps until.

A pause (``PAUSE_LUA``) works for any limit key, with a rate or a concurrency only: it moves rq's held jobs of
the key into the key's rate held set (their scores kept), where no promotion of rq's looks, and marks the rate
hash ``paused``. While paused, a concurrency-only job (``HOLD_LUA``, in place of rq's promotion at its
enqueue) goes to that held set too. A resume runs ``RELEASE_LUA`` on the key: a key without a rate
(``count``/``seconds`` absent) has its held set moved back into rq's held set and promoted at once.
"""

from rq.rate_limit import ACQUIRE_AND_ENQUEUE_SCRIPT

# ARGV: 1 "<p>:optima:rate:", 2 the due zset, 3 rq's queue key prefix, 4 rq's job key prefix, 5 rq's limit
# key prefix "<p>:rl:", 6 rq's set of limit keys, 7 enqueued_at (rq's text), 8 "key" or "due", 9 the scoped
# key (mode "key"), 10 the idle TTL (s), 11 the zset of the keys with a rate (those idle for the TTL are
# forgotten, mode "due").
# Mode "key": release that key -> the released ids. Mode "due": release every key due by now -> {seconds to
# the next due time, or "" when none}. Times are Redis' own (TIME).
RELEASE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local released = {}

local function promote_rq(scoped, concurrency)
  local promoted = {}
  local allowed = ARGV[5] .. scoped .. ':allowed'
  local held = ARGV[5] .. scoped .. ':rate_limited'
  redis.call('SADD', ARGV[6], scoped)
  redis.call('HSET', ARGV[5] .. scoped, 'concurrency', concurrency)
  while redis.call('ZCARD', allowed) < concurrency do
    local popped = redis.call('ZPOPMIN', held)
    if #popped == 0 then break end
    local id = popped[1]
    local f = redis.call('HMGET', ARGV[4] .. id, 'origin', 'status', 'enqueue_at_front')
    if f[1] and f[2] == 'rate_limited' then
      redis.call('ZADD', allowed, now, id)
      if f[3] == '1' then redis.call('LPUSH', ARGV[3] .. f[1], id) else redis.call('RPUSH', ARGV[3] .. f[1], id) end
      redis.call('HSET', ARGV[4] .. id, 'status', 'queued', 'enqueued_at', ARGV[7])
      promoted[#promoted + 1] = id
    end
  end
  return promoted
end

local function release(scoped)
  local cfg_key = ARGV[1] .. scoped
  local held_key = cfg_key .. ':held'
  local cfg = redis.call('HMGET', cfg_key, 'count', 'seconds', 'tat', 'paused', 'concurrency')
  local count, seconds = tonumber(cfg[1]), tonumber(cfg[2])
  if cfg[4] == '1' then
    redis.call('ZREM', ARGV[2], scoped)
    return
  end
  if (not cfg[1]) and (not cfg[2]) then
    -- a concurrency-only key, resumed: its held jobs back to rq's held set (oldest first), promoted now; the key
    -- is rq's alone again
    redis.call('ZREM', ARGV[2], scoped)
    redis.call('ZREM', ARGV[11], scoped)
    if redis.call('ZCARD', held_key) > 0 then
      local rq_held = ARGV[5] .. scoped .. ':rate_limited'
      redis.call('ZUNIONSTORE', rq_held, 2, rq_held, held_key, 'AGGREGATE', 'MIN')
      redis.call('DEL', held_key)
      local concurrency = tonumber(redis.call('HGET', ARGV[5] .. scoped, 'concurrency')) or tonumber(cfg[5]) or 1
      for _, id in ipairs(promote_rq(scoped, concurrency)) do released[#released + 1] = id end
    end
    redis.call('DEL', cfg_key)
    return
  end
  if (not count) or (not seconds) or count < 1 or seconds <= 0 then
    redis.call('ZREM', ARGV[2], scoped)
    return
  end
  local step = seconds / count
  local tau = math.min(seconds - step, step)
  local tat = math.max(tonumber(cfg[3]) or 0, now)
  local to_rq = nil
  while tat - now <= tau + 0.000001 do
    local popped = redis.call('ZPOPMIN', held_key)
    if #popped == 0 then break end
    local id = popped[1]
    local job = ARGV[4] .. id
    local f = redis.call('HMGET', job, 'origin', 'status', 'enqueue_at_front', 'rate_limit_key')
    if f[1] and f[2] == 'rate_limited' then
      if f[4] and f[4] ~= '' then
        redis.call('ZADD', ARGV[5] .. f[4] .. ':rate_limited', now, id)
        to_rq = f[4]
      else
        if f[3] == '1' then redis.call('LPUSH', ARGV[3] .. f[1], id) else redis.call('RPUSH', ARGV[3] .. f[1], id) end
        redis.call('HSET', job, 'status', 'queued', 'enqueued_at', ARGV[7])
      end
      released[#released + 1] = id
      tat = tat + step
    end
  end
  redis.call('HSET', cfg_key, 'tat', string.format('%.6f', tat))
  redis.call('ZADD', ARGV[11], 'GT', now, scoped)  -- in use: not forgotten while it holds jobs
  if redis.call('ZCARD', held_key) > 0 then
    redis.call('ZADD', ARGV[2], tat - tau, scoped)
    redis.call('PERSIST', cfg_key)
  else
    redis.call('ZREM', ARGV[2], scoped)
    redis.call('EXPIRE', cfg_key, math.ceil(tat - now) + tonumber(ARGV[10]))
  end
  if to_rq then
    promote_rq(to_rq, tonumber(redis.call('HGET', ARGV[5] .. to_rq, 'concurrency')) or tonumber(cfg[5]) or 1)
  end
end

if ARGV[8] == 'key' then
  release(ARGV[9])
  return released
end
redis.call('ZREMRANGEBYSCORE', ARGV[11], '-inf', now - tonumber(ARGV[10]))
for _, scoped in ipairs(redis.call('ZRANGEBYSCORE', ARGV[2], '-inf', now)) do
  release(scoped)
end
local nxt = redis.call('ZRANGE', ARGV[2], 0, 0, 'WITHSCORES')
if #nxt == 0 then return {''} end
return {string.format('%.6f', math.max(0, tonumber(nxt[2]) - now))}
"""

# Pause a limit key. KEYS: 1 the rate hash, 2 the rate held set, 3 rq's held set, 4 rq's hash of the key, 5 the zset
# of the keys with a rate, 6 the due zset. ARGV: 1 the scoped key. -> how many of rq's held jobs it moved.
# The key's concurrency is kept on the rate hash: rq deletes its own hash once its sets are empty (its
# maintenance, ``RateLimitRegistry.cleanup``), and the resume needs it.
PAUSE_LUA = """
redis.call('HSET', KEYS[1], 'paused', '1')
local concurrency = redis.call('HGET', KEYS[4], 'concurrency')
if concurrency then redis.call('HSET', KEYS[1], 'concurrency', concurrency) end
redis.call('PERSIST', KEYS[1])
local moved = redis.call('ZCARD', KEYS[3])
if moved > 0 then
  redis.call('ZUNIONSTORE', KEYS[2], 2, KEYS[2], KEYS[3], 'AGGREGATE', 'MIN')
  redis.call('DEL', KEYS[3])
end
redis.call('ZADD', KEYS[5], '+inf', ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
return moved
"""

# The enqueue of a concurrency-only job (queues/producer/limits.py ``enqueue_into``): held in rq's held set and
# promoted by rq's own Lua when a slot is free, or, while its key is paused, held in the key's rate held set.
# KEYS: 1 rq's allowed set, 2 rq's held set, 3 the rate hash, 4 the rate held set. ARGV: 1-5 rq's (concurrency,
# timestamp, enqueued_at, queue key prefix, job key prefix), 6 the job id, 7 its held score. -> the promoted ids.
HOLD_LUA = (
    """
if redis.call('HGET', KEYS[3], 'paused') == '1' then
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[6])
  redis.call('HSET', KEYS[3], 'concurrency', ARGV[1])
  return {}
end
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[6])
"""
    + ACQUIRE_AND_ENQUEUE_SCRIPT
)
