"""The Lua of rate limits per key (queues/producer/rates.py): release a key's held jobs as its budget allows.

GCRA per key (``tat``: the theoretical arrival time of its next job); one step of tolerance. A released job
goes onto its queue (its status ``queued``, as rq's promotion Lua writes it), or, when it also has rq's
concurrency fields, into rq's held set of the same scoped key, then rq's promotion runs inline. A key left
with held jobs is scored in the due zset by when its next token comes, which the RQ scheduler's ``rates.wait``
sleeps until.
"""

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
    end
  end
end

local function release(scoped)
  local cfg_key = ARGV[1] .. scoped
  local held_key = cfg_key .. ':held'
  local cfg = redis.call('HMGET', cfg_key, 'count', 'seconds', 'tat', 'paused', 'concurrency')
  local count, seconds = tonumber(cfg[1]), tonumber(cfg[2])
  if (not count) or (not seconds) or count < 1 or seconds <= 0 or cfg[4] == '1' then
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
