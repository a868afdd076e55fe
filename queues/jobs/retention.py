"""Retention of completed and failed jobs (the record's ``removeOnComplete: {age: 24h, count: 1000}``
and ``removeOnFail: false``).

- Age: a completed job's hash, results stream and finished-registry entry carry the queue's
  ``result_ttl`` (24 h): RQ sets those expiries itself when the job succeeds (``job.cleanup`` /
  ``Result.save``); the finished registry ``<prefix>:finished:<queue>`` is a sorted set scored by
  expiry time, which RQ trims in its maintenance.
- Count: RQ has no cap. ``TRIM_LUA`` deletes, when the registry holds more than ``completed_max``
  entries, the oldest (lowest expiry) with every key of theirs — the job hash,
  ``<prefix>:results:<id>`` (RQ 3 keeps results in a stream beside the hash),
  ``:dependents``/``:dependencies`` and ``<prefix>:executions:<id>``, and its search index entries
  (queues/search/index.py). One call costs ZCARD plus the
  entries it removes: it never scans the registry, so its cost does not grow with it. A worker notes
  each job it ran (``Completions``): after each job it re-scores that job with sub-second precision in
  the pipeline of its heartbeat (a ZADD XX: rq scores whole seconds, which would leave the order of
  the jobs of one second to their ids), and trims each queue after every ``trim_every`` jobs (100, or a
  tenth of a smaller cap) and whenever it goes idle or stops. A queue may so hold up to 99 jobs over a cap
  of 1,000 (at most 10 % over any cap) for a moment while jobs flow.
- Failed (dead) jobs: ``failure_ttl`` -1 keeps them, hash and results, until an operator acts
  (queues/failures/deadletter.py). Both overridable per queue.
"""

import logging
import threading
import time
from typing import TYPE_CHECKING

from queues import conf
from queues.catalog.lookup import get_config
from queues.exceptions import UnknownQueue
from queues.keyspace import keys

if TYPE_CHECKING:
    from redis.commands.core import Script

logger = logging.getLogger("queues.retention")  # a documented logger name: kept when the module moved

# KEYS[1] finished registry, KEYS[2] the queue's search index set (queues/search/index.py); ARGV[1] max
# kept; ARGV[2] job key prefix ("<prefix>:job:"); ARGV[3] results key prefix; ARGV[4] executions key
# prefix; ARGV[5], ARGV[6] (may be ''): the job just completed and its expiry with sub-second precision —
# RQ scores in whole seconds, which would leave the order of the jobs of one second to their ids;
# ARGV[7], ARGV[8]: the search index's function and owner key prefixes.
# A removed job leaves the search index with its keys: its queue's set, its function's (read from the
# start of rq's ``description``, "<function>(<arguments>)") and its owner's (``meta["owner"]``); without
# that the index kept every completed job for 24 h however few retention keeps (100,000 jobs: +20 MiB).
# A description that is not rq's call string leaves the function's entry to the index's own expiry.
# The removed jobs leave each index set in one ZREM and their keys go in one DEL (per 1,000), and their ids,
# descriptions and metas are read in one SORT (``BY nosort``: the sorted set's own order, its range; ``GET
# <job prefix>*->field``: a field of each one's hash): a trim costs a few commands however many jobs it removes, not
# four commands a job, then one HMGET a job (issue 36: a worker trims every ``trim_every`` jobs once its queues hold
# ``completed_max`` completed jobs, so past the cap every job paid them). ARGV[9]: "1" to read with SORT. A Redis
# that refuses it reads with an HMGET a job, as before: Redis 7 allows SORT's GET patterns only to users that may
# read every key ("GET option of SORT denied due to insufficient ACL permissions": an ACL user confined to the
# prefix, as docs/decisions.md advises, so there the trim costs what it did), and an ACL may deny SORT (NOPERM).
# The script then answers {removed, 1}, and this process asks that client for no SORT again (``_refused``); else
# it answers {removed, 0}. Redis 6.2, the private redis-server of dev.py, and a user that may read every key
# (Redis's default user) read with SORT.
TRIM_LUA = """
if ARGV[5] and ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[6], ARGV[5])
end
local n = redis.call('ZCARD', KEYS[1])
local keep = tonumber(ARGV[1])
if n <= keep then return {0, 0} end
local ids, read, refused = nil, nil, 0
if ARGV[9] == '1' then
  local job = ARGV[2] .. '*->'
  local got = redis.pcall('SORT', KEYS[1], 'BY', 'nosort', 'LIMIT', 0, n - keep,
    'GET', '#', 'GET', job .. 'description', 'GET', job .. 'meta')
  if type(got) == 'table' and not got.err then
    ids, read = {}, {}
    for i = 1, #got, 3 do
      ids[#ids + 1] = got[i]
      read[#read + 1] = {got[i + 1], got[i + 2]}
    end
  else
    refused = 1
  end
end
if not ids then
  ids = redis.call('ZRANGE', KEYS[1], 0, n - keep - 1)
end
local members, indexes, doomed = {}, {}, {}
local function leaves(index, id)
  if not members[index] then
    members[index] = {}
    indexes[#indexes + 1] = index
  end
  local list = members[index]
  list[#list + 1] = id
end
for k, id in ipairs(ids) do
  local fields = read and read[k] or redis.pcall('HMGET', ARGV[2] .. id, 'description', 'meta')
  if type(fields) == 'table' and not fields.err then
    local func = type(fields[1]) == 'string' and string.match(fields[1], '^([^(]+)%(')
    if func then leaves(ARGV[7] .. func, id) end
    if type(fields[2]) == 'string' then
      local ok, meta = pcall(cjson.decode, fields[2])
      local owner = ok and type(meta) == 'table' and meta['owner']
      if type(owner) == 'string' or type(owner) == 'number' then
        if type(owner) == 'number' and owner == math.floor(owner) then owner = string.format('%d', owner) end
        leaves(ARGV[8] .. tostring(owner), id)
      end
    end
  end
  leaves(KEYS[2], id)
  local job = ARGV[2] .. id
  for _, key in ipairs({job, job .. ':dependents', job .. ':dependencies', ARGV[3] .. id, ARGV[4] .. id}) do
    doomed[#doomed + 1] = key
  end
end
for _, index in ipairs(indexes) do
  local list = members[index]
  for i = 1, #list, @CHUNK@ do
    redis.pcall('ZREM', index, unpack(list, i, math.min(i + @CHUNK@ - 1, #list)))
  end
end
for i = 1, #doomed, @CHUNK@ do
  redis.call('DEL', unpack(doomed, i, math.min(i + @CHUNK@ - 1, #doomed)))
end
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - keep - 1)
return {#ids, refused}
""".replace("@CHUNK@", "1000")  # members or keys a command: Lua's unpack stops near 8,000 (LUAI_MAXCSTACK)

_scripts: dict[int, "Script"] = {}  # id(connection) -> its Script
_refused: set[int] = set()  # id(connection) of the clients whose Redis refused the trim's SORT (ACL)


def _trim_script(connection):
    script = _scripts.get(id(connection))
    if script is None:
        script = _scripts[id(connection)] = connection.register_script(TRIM_LUA)
    return script


def completed_max_of(name):

    try:
        return get_config(name).options["completed_max"]
    except KeyError:
        return conf.JOB_DEFAULTS["completed_max"]


def enforce_completed_max(queue, job=None, keep=None):
    """Delete the oldest completed jobs of ``queue`` beyond ``completed_max``; returns how many.
    Never raises (called by the worker after a success)."""

    try:
        if keep is None:
            try:
                keep = completed_max_of(queue.name)
            except UnknownQueue:
                return 0
        prefixes = [keys.job_key_prefix(), keys.results_key(""), keys.job_executions_key("")]
        rescore = ["", ""]
        ttl = getattr(job, "result_ttl", None)
        if job is not None and ttl is not None and ttl > 0:
            rescore = [job.id, repr(time.time() + ttl)]
        index = [keys.search_func_key(""), keys.search_owner_key("")]
        sort = "" if id(queue.connection) in _refused else "1"
        removed, refused = _trim_script(queue.connection)(
            keys=[keys.finished_key(queue.name), keys.search_queue_key(queue.name)],
            args=[int(keep), *prefixes, *rescore, *index, sort],
        )
        if refused:
            _refused.add(id(queue.connection))
    except Exception:  # noqa: BLE001 — retention must never fail a job that succeeded
        logger.exception("Could not trim the completed jobs of queue %s", getattr(queue, "name", queue))
        return 0
    if removed:
        logger.debug("Removed %d completed jobs of %s beyond completed_max=%s", removed, queue.name, keep)
    return int(removed)


TRIM_EVERY = 100  # jobs of a queue a worker runs between two trims at most (and on going idle)
TRIM_SHARE = 10  # ... and at most a tenth of the queue's cap: a queue holds at most 10 % over it for a moment


def trim_every(completed_max):
    """Jobs of a queue (``completed_max``: its cap) between two trims: ``TRIM_EVERY``, or a tenth of a smaller cap
    (at least 1). Each trim is a round trip of the worker's main thread and five commands besides the jobs it
    removes, so every 10 jobs cost a job 0.8 commands past the cap; every 100, 0.08 (issue 36, ninth pass)."""
    return max(1, min(TRIM_EVERY, int(completed_max) // TRIM_SHARE))


class Completions:
    """Jobs a worker ran, waiting for their re-score and their queue's trim (worker-side only)."""

    def __init__(self):
        self._lock = threading.Lock()  # the jobs of a concurrent worker end in several threads
        self.scores = {}  # queue name -> {job id: expiry}
        self.since_trim = {}  # queue -> jobs noted since its last trim
        self.queues = {}  # queue name -> queue object
        self.every = {}  # queue name -> its ``trim_every``

    def note(self, queue, job, rescore=True):
        """``rescore``: False when the job's finished entry was scored precisely already (the fork-free
        worker's success, queues/worker/fastpath.py)."""
        ttl = getattr(job, "result_ttl", None)
        with self._lock:
            if rescore and ttl is not None and ttl > 0:
                self.scores.setdefault(queue.name, {})[job.id] = time.time() + ttl
            self.queues[queue.name] = queue
            self.since_trim[queue.name] = self.since_trim.get(queue.name, 0) + 1
        if queue.name not in self.every:
            try:
                self.every[queue.name] = trim_every(completed_max_of(queue.name))
            except UnknownQueue:
                self.every[queue.name] = 1  # not declared: enforce_completed_max does nothing for it

    def rescore_into(self, pipe):
        """Queue the sub-second re-scores into ``pipe`` (ZADD XX: only jobs in the finished registry)."""
        with self._lock:
            scores, self.scores = self.scores, {}
        for name, members in scores.items():
            pipe.zadd(keys.finished_key(name), members, xx=True)

    def trim(self, idle=False):
        """Trim the queues that are due (all noted ones when ``idle``). Never raises."""
        with self._lock:
            due = [
                name
                for name, count in self.since_trim.items()
                if count and (idle or count >= self.every.get(name, TRIM_EVERY))
            ]
            for name in due:
                self.since_trim[name] = 0
        for name in due:
            enforce_completed_max(self.queues[name])
