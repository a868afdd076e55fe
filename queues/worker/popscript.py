"""The pop's Lua (issue 36): ``POP_LUA``, what ``dequeue.Dequeuer`` sends to take the next jobs of a worker's queues
(pause-aware, by priority band, starting the jobs it may start: ``popstart.py``), and ``TWICE_LUA``, the check of an
id a blocking pop moved. Kept apart from the dequeuer's Python (its waits, polls and the reading of the reply) because
the script is a protocol of its own: its KEYS, ARGV and flat reply are written down here, once, beside it.
"""

from queues.jobs import execution as execution_record
from queues.jobs import meta as jobmeta
from queues.keyspace import entries
from queues.worker.popstart import EXECUTIONS_SLACK_SECONDS

# KEYS: the paused set, then per queue (in the worker's order) its high, normal and low bands, its
# intermediate list, its "banded" mark (keys.banded_key) and its started registry. ARGV: the job key prefix, how
# many jobs to pop at most (``count``: the concurrent worker's free slots, else 1), how many arguments of the start
# follow (0: the pop starts nothing), those (``popstart.START_FIELDS``, then an execution id for each job the call
# may pop), then the queue names.
# -> {1, until, entry..., entry...}, flat: up to ``count`` jobs (``until``: the unix second the worker's set of
# executions lives until, as its starts left it: ``popstart.EXECUTIONS_SLACK_SECONDS``), in the worker's order of
# queues and bands, each entry five items and its hash: kind, the queue's (normal) key, id, execution id ('' but for
# kind 3), n, then the n items of the job's hash as HGETALL gives it (n = 0 when the job's key is not a hash: HGETALL's
# WRONGTYPE, caught, and the caller reads it, and refuses it, as it did before the hash came with the pop; n = 0 too,
# and the job not started, for a hash too large to send: more than ``entries.JOB_FIELDS`` fields or
# ``entries.RUN_STORED_BYTES`` bytes, which the caller reads size-checked and refuses, ``entries.too_large``). Flat
# because redis-server 6.2 writes each nested array of a script's reply with a write(2) of its own: the nested reply
# this was cost 4 writes a pop of one job, this one 1 (issue 36). Kind 1: a job popped into the intermediate list;
# the hash's ``jobs.meta.PUT_BACK`` field, read with it, is taken off when it is there: it vouches for this one pop
# (gate.replayed). (No TYPE before the HGETALL, no HDEL of a field that is not there: two commands a job fewer, issue
# 36.) Kind 2: an id that was in the intermediate list already (``TWICE_LUA``): popped by another worker and not yet
# started, this copy (pushed twice) is taken off again (no hash). Kind 3: a job the pop started (``popstart.py``), its
# hash as it was before the start: its hash names the queue as its origin and says it runs (a status of
# ``gate.RUNS``, or put back by one of the app's paths); its id went from the queue straight to the started registry,
# never into the intermediate list; the job STARTED as rq's ``prepare_for_execution`` writes it, naming its
# execution, and persisted (rq's ``prepare_job_execution``), rq's records written when asked, the worker BUSY when
# asked. Or, when there was none, {0, how many paused names follow, paused names..., names of empty queues marked
# banded...}.
POP_LUA = (
    """
local paused, banded, out, n, found = {}, {}, {1, 0}, 2, 0
local want = tonumber(ARGV[2])
local s = tonumber(ARGV[3])
local first = 4 + s
local start, runs, started = s > 0, {}, 0
local lives = start and tonumber(ARGV[15]) or 0  -- the worker's set of executions lives at least until then
local lmpop = start and (redis.REDIS_VERSION_NUM or 0) >= 0x070000  -- LMPOP: Redis 7 (6.2 has no such field)
if start then
  for status in string.gmatch(ARGV[14], '[^,]+') do runs[status] = true end
end
local function put(kind, key, id, eid, data)  -- an entry of the reply, flat: its hash's length, then the hash
  local m = data and #data or 0  -- (a hash HGETALL could not read is never passed: no data, n = 0)
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = kind, key, id, eid or '', m
  for i = 1, m do out[n + 5 + i] = data[i] end
  n, found = n + 5 + m, found + 1
end
local function fits(data)  -- a hash the worker may be sent (entries.too_large: the worker checks it again)
  if #data > 2 * @JOB_FIELDS@ then return false end
  local size = 0
  for i = 1, #data do size = size + #data[i] end
  return size <= @RUN_STORED_BYTES@
end
local function begin(job, id, data, queue, registry)
  local status, put_back, timeout, origin = '', false, nil, nil
  for f = 1, #data, 2 do
    local name = data[f]
    if name == 'status' then status = data[f + 1]
    elseif name == '@PUT_BACK@' then put_back = true
    elseif name == 'timeout' then timeout = tonumber(data[f + 1])
    elseif name == 'origin' then origin = data[f + 1] end
  end
  if origin ~= queue or not (put_back or status == '' or runs[status]) then
    return nil
  end
  if #id > @ID_CHARS@ or not string.find(id, '^[%w%-_.]+$') then
    return nil  -- an id the worker could not name in a started entry or a log line as it is: popped as before
  end
  local eid = ARGV[16 + started]
  local ttl = tonumber(ARGV[8])
  if timeout ~= -1 then
    if timeout and timeout ~= 0 then ttl = timeout end
    ttl = math.floor(ttl) + 60
  end
  ttl = ttl + tonumber(ARGV[9])
  local composite = id .. ':' .. eid
  local added = redis.pcall('ZADD', registry, tonumber(ARGV[6]) + ttl, composite)
  if type(added) == 'table' and added.err then
    return nil
  end
  started = started + 1
  if put_back then
    redis.call('HDEL', job, '@PUT_BACK@')
  end
  redis.call('HSET', job, 'last_heartbeat', ARGV[5], 'status', 'started', 'started_at', ARGV[5],
    'worker_name', ARGV[4], '@FIELD@', eid)
  redis.call('PERSIST', job)
  if ARGV[10] == '1' then
    local record = ARGV[11] .. composite
    redis.pcall('HSET', record, 'id', eid, 'job_id', id, 'created_at', ARGV[7], 'last_heartbeat', ARGV[7],
      'worker_name', ARGV[4])
    redis.pcall('EXPIRE', record, ttl)
    redis.pcall('SADD', ARGV[12], composite)
    local now = tonumber(ARGV[6])
    if now + ttl + 60 > lives then  -- else it outlives this entry already (popstart.EXECUTIONS_SLACK_SECONDS)
      lives = now + ttl + 60 + @SLACK@
      redis.pcall('EXPIRE', ARGV[12], lives - now)
    end
  end
  if ARGV[13] ~= '' and started == 1 and redis.call('EXISTS', ARGV[13]) == 1 then
    redis.pcall('HSET', ARGV[13], 'state', 'busy')  -- a registered worker's only: never a hash of one field
  end
  return eid
end
for q = first, #ARGV do
  local k = 2 + (q - first) * 6
  if redis.call('SISMEMBER', KEYS[1], ARGV[q]) == 1 then
    paused[#paused + 1] = ARGV[q]
  else
    local band = 0
    while band <= 2 and found < want do
      local asked, ids = want - found, nil
      if lmpop then  -- the first band that holds any, its jobs in one command: no LPOP of an empty band before it
        local call = {'LMPOP', 3 - band}
        for b = band, 2 do call[#call + 1] = KEYS[k + b] end
        call[#call + 1] = 'LEFT'
        call[#call + 1] = 'COUNT'
        call[#call + 1] = asked
        local got = redis.call(unpack(call))
        if got then
          for b = band, 2 do
            if KEYS[k + b] == got[1] then band = b end
          end
          ids = got[2]
        else
          band = 2  -- every band left is empty: the one below moves past the last
        end
      elseif start then
        ids = redis.call('LPOP', KEYS[k + band], asked)  -- with a count (Redis 6.2): one command for them all
      else
        local id = redis.call('LMOVE', KEYS[k + band], KEYS[k + 3], 'LEFT', 'RIGHT')
        ids, asked = id and {id}, 1
      end
      if not ids then
        band = band + 1
      else
        for i, id in ipairs(ids) do
          local data, eid
          if start then
            data = redis.pcall('HGETALL', ARGV[1] .. id)
            if not data.err and not fits(data) then
              data = {err = 'too large'}  -- not sent: popped into the intermediate list, the worker reads it capped
            elseif not data.err and #data > 0 then
              eid = begin(ARGV[1] .. id, id, data, ARGV[q], KEYS[k + 5])
            end
            if eid then
              put(3, KEYS[k + 1], id, eid, data)
            else
              local pushed = redis.pcall('RPUSH', KEYS[k + 3], id)
              if type(pushed) == 'table' and pushed.err then
                -- the intermediate list is of another type: the ids taken and not started go back to the head of
                -- their band, in their order, before the error (the worker sets the key aside, pops again, and
                -- takes back the jobs started here: their reply is never read)
                for j = #ids, i, -1 do
                  redis.call('LPUSH', KEYS[k + band], ids[j])
                end
                return pushed
              end
            end
          end
          if eid then  -- started: in the reply already
          elseif #redis.call('LPOS', KEYS[k + 3], id, 'COUNT', 2) > 1 then
            redis.call('LREM', KEYS[k + 3], -1, id)
            put(2, KEYS[k + 1], id)
          else
            local job = ARGV[1] .. id
            if not data then
              data = redis.pcall('HGETALL', job)
            end
            if data.err or not fits(data) then
              put(1, KEYS[k + 1], id)
            else
              for f = 1, #data, 2 do
                if data[f] == '@PUT_BACK@' then
                  redis.call('HDEL', job, '@PUT_BACK@')
                  break
                end
              end
              put(1, KEYS[k + 1], id, nil, data)
            end
          end
        end
        if #ids < asked then
          band = band + 1  -- the band is empty now: no LPOP of it again
        end
      end
    end
    if found >= want then
      out[2] = lives
      return out
    end
    if found == 0 and redis.call('EXISTS', KEYS[k + 4]) == 1 then
      banded[#banded + 1] = ARGV[q]
    end
  end
end
if found > 0 then
  out[2] = lives
  return out
end
local none = {0, #paused}
for _, name in ipairs(paused) do none[#none + 1] = name end
for _, name in ipairs(banded) do none[#none + 1] = name end
return none
""".replace("@PUT_BACK@", jobmeta.PUT_BACK)
    .replace("@FIELD@", execution_record.FIELD)
    .replace("@ID_CHARS@", str(entries.ID_CHARS))
    .replace("@SLACK@", str(EXECUTIONS_SLACK_SECONDS))
    .replace("@JOB_FIELDS@", str(entries.JOB_FIELDS))
    .replace("@RUN_STORED_BYTES@", str(entries.RUN_STORED_BYTES))
)

# The id just moved (BLMOVE) to the tail of the intermediate list KEYS[1] is there twice: another worker
# popped it and has not started it yet (the start takes it off that list), so this copy of an id pushed
# twice is taken off again -> 1; else 0. Atomic: of two workers that pop two copies, one runs it.
TWICE_LUA = """
if #redis.call('LPOS', KEYS[1], ARGV[1], 'COUNT', 2) > 1 then
  redis.call('LREM', KEYS[1], -1, ARGV[1])
  return 1
end
return 0
"""
