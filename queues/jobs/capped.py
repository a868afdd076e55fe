"""The size-checked read of a job hash: what Redis sends of it is bounded, however large it was planted.

HGETALL sends a hash whole: a hash planted at 100 MB crossed the wire on every panel page that showed it, before
``jobs/read.py`` found it too large (``entries.JOB_BYTES``). ``read_key`` queues ``READ_LUA`` instead, and
``hash_of`` turns its reply back into what HGETALL's would have been: a dict for a hash within the caps, or an
``Oversized`` (its first fields, each cut) for one over ``entries.READ_BYTES`` or ``entries.JOB_FIELDS``.
``jobs/read.py`` (``read_hash``, ``load``) is its reader: the panel, reconcile, the abandoned-job scan and
``/jobs/<id>/`` read job hashes through it.
"""

import redis

from queues.keyspace import entries

# The size-checked read of one job hash. KEYS[1]: the hash. ARGV: the bytes it may hold as stored, the fields it
# may have, how many fields of a larger one are sent, the bytes sent of each of their names and values, the largest
# value read to be cut. Replies {0}: no key; {-1}: not a hash; {1, HGETALL}; or, for a hash over either cap, {2, its
# field count, its size as stored (-1 when not summed: too many fields), then name, name's length, value, value's
# length, ...}: its first fields by name (any, HRANDFIELD's, when there are too many to sort), each cut; a value
# over the last argument is sent empty, with its length. Written here because Redis has no command that reads a
# hash, or a field's value, only up to a size: MEMORY USAGE (a job's hash: one call) or HSTRLEN measure them where
# they lie, and a value is copied into the script only when it is small (an HGET of a 50 MB value there held Redis
# for ~100 ms, longer than HGETALL). It costs Redis ~20 µs a job where HGETALL costs 2 (a 16-field hash): a panel
# page of 100 jobs, 2 ms.
READ_LUA = """
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {0} end
if kind ~= 'hash' then return {-1} end
local budget, most, keep, cut, readable =
  tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local count, size, names, lengths = redis.call('HLEN', key), -1, {}, {}
local held = count <= most and redis.pcall('MEMORY', 'USAGE', key, 'SAMPLES', 0)
if type(held) == 'number' and held <= budget then
  -- what Redis holds for it, its overhead included, is within the cap: read at once (an ACL without MEMORY, or an
  -- error, sums it below)
  return {1, redis.call('HGETALL', key)}
end
if count <= most then
  names, size = redis.call('HKEYS', key), 0
  for _, name in ipairs(names) do
    lengths[name] = redis.call('HSTRLEN', key, name)
    size = size + #name + lengths[name]
  end
  if size <= budget then return {1, redis.call('HGETALL', key)} end
  table.sort(names)
else
  names = redis.call('HRANDFIELD', key, keep)
end
local out = {2, count, size}
for i = 1, math.min(#names, keep) do
  local name = names[i]
  local length = lengths[name] or redis.call('HSTRLEN', key, name)
  local value = ''
  if length <= readable then value = string.sub(redis.call('HGET', key, name) or '', 1, cut) end
  out[#out + 1] = string.sub(name, 1, cut)
  out[#out + 1] = #name
  out[#out + 1] = value
  out[#out + 1] = length
end
return out
"""
SENT_FIELDS = entries.RAW_FIELDS  # of a hash over the caps: what a corrupt dead letter keeps, more than a page shows
SENT_BYTES = max(entries.RAW_VALUE_BYTES, entries.PREVIEW_CHARS * 4)  # of each name and value: both cut further
READ_VALUE_BYTES = 64 * 1024  # a larger value of such a hash is not read at all: its length is sent, not its start


class Oversized(dict):
    """A job hash over ``entries.READ_BYTES`` or ``entries.JOB_FIELDS``, as ``READ_LUA`` sent it: its first
    ``SENT_FIELDS`` fields (bytes -> bytes, each name and value an ``entries.Cut`` when cut), ``count`` the fields it
    has in all, ``size`` its bytes as stored (-1: not summed, it has too many fields)."""

    def __init__(self, pairs, count, size):
        super().__init__(pairs)
        self.count, self.size = count, size

    @property
    def why(self):
        if self.size < 0:
            return f"too large to read: its hash has {self.count} fields (at most {entries.JOB_FIELDS} here)"
        return f"too large to read: its hash is over {entries.JOB_BYTES // 1024} KiB ({self.size} bytes as stored)"

    @property
    def why_to_run(self):
        """``why`` for a hash read with ``entries.RUN_STORED_BYTES`` (``read_key``'s budget): too large to run."""
        return entries.too_large_hash(self.count, self.size) or self.why


def read_key(pipe, key, budget=entries.READ_BYTES):
    """Queue on ``pipe`` the size-checked read of the job hash at ``key`` (``READ_LUA``); ``hash_of`` reads its reply
    (``jobs.read.load`` calls it). ``budget``: the bytes as stored of a hash read whole (the worker's reads, which
    run jobs of any size a producer writes, pass ``entries.RUN_STORED_BYTES``: ``entries.too_large``).
    EVAL, not EVALSHA: a page's pipeline stays one round trip, with no script to load first or again after a
    SCRIPT FLUSH, for a script of a kilobyte."""
    pipe.eval(READ_LUA, 1, key, budget, entries.JOB_FIELDS, SENT_FIELDS, SENT_BYTES, READ_VALUE_BYTES)


def read(connection, key, budget=entries.READ_BYTES):
    """``read_key`` of one hash in a round trip of its own -> ``hash_of``'s answer (a connection error raised)."""
    with connection.pipeline(transaction=False) as pipe:
        read_key(pipe, key, budget)
        return hash_of(pipe.execute(raise_on_error=False)[0])


# KEYS[1]: a job hash; ARGV[1]: a field, ARGV[2]: the most bytes read of it. Its value, nil when it has none, or its
# length (an integer) when it is longer: Redis copies no value that large into the reply (or into Lua).
FIELD_LUA = """
local n = redis.call('HSTRLEN', KEYS[1], ARGV[1])
if n > tonumber(ARGV[2]) then return n end
return redis.call('HGET', KEYS[1], ARGV[1])
"""


def read_field(pipe, key, field):
    """Queue on ``pipe`` the read of one field of the job hash at ``key``: its value (bytes, or None), or its length
    (an int) when it is over ``entries.JOB_BYTES`` (no job a producer writes has a longer one), so a value planted
    far over the caps does not cross the wire (the panel's ``?func=`` filter reads each listed job's ``data``).
    EVAL, as ``read_key``."""
    pipe.eval(FIELD_LUA, 1, key, field, entries.JOB_BYTES)


def hash_of(reply):
    """A ``read_key`` reply as HGETALL's would be (a dict, ``{}`` for no key, a ``redis.ResponseError`` for a
    key that is not a hash), or an ``Oversized``. Anything else (an HGETALL reply, an error) is returned as it is."""
    if not isinstance(reply, list) or not reply:
        return reply
    if reply[0] == 0:
        return {}
    if reply[0] == -1:
        return redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
    if reply[0] == 1:
        flat = reply[1]
        return dict(zip(flat[::2], flat[1::2]))
    sent = reply[3:]

    def value(head, size):
        return head if len(head) == size else entries.Cut(head, size)

    pairs = [(value(*sent[i : i + 2]), value(*sent[i + 2 : i + 4])) for i in range(0, len(sent), 4)]
    return Oversized(pairs, reply[1], reply[2])
