"""A pipeline's queued commands sent in one round trip without redis-py's per-reply work: as one Lua call
(``execute``, ``execute_each``) or as a MULTI read back raw (``execute_multi``).

redis-py packs a MULTI of ~40 commands command by command and parses ~42 replies (each through its
response callback) in Python; a worker that records thousands of jobs a second spends more of its
time there than Redis spends running them. ``execute(pipe)`` sends the commands queued on ``pipe``
(a redis-py pipeline, not executed) as the arguments of one EVALSHA of ``BATCH_LUA``, which runs
them one after the other with ``redis.pcall``: atomic like the MULTI (a script runs alone), and
like a MULTI's EXEC a command that fails (WRONGTYPE on a planted key) fails alone while the others
apply; the first such error is raised after the call, as ``Pipeline.execute`` raises it. Only the
replies asked for (``want``, indexes into the queued commands) come back. A pipeline holding what a
script may not call (a script of its own: rq's limit promotion) runs as the MULTI it is.

When nothing failed and every reply asked for is an integer (the worker's start), the script
answers with one string, ``"3,0"`` (``""`` for none), not with a nested array: redis-server 6.2 writes each
part of an array a script returns with a write(2) of its own (3 for ``{{0}, {}}``), and a write to a socket is
the largest single cost of a job to the server (issue 36: ``bench/redis_cost.py --detail``).

The script costs the server more than the MULTI would (every argument made a Lua string, each command's
arguments and reply converted both ways): 194,000 instructions of redis-server for a success's ten commands as
the script, 113,000 as the MULTI (callgrind, issue 36). Each is one command to Redis's count (EVALSHA) against
two (MULTI and EXEC). So the batches with the most arguments go as MULTIs read back raw: the worker's success
(``execute_multi``) and the enqueue (the whole job hash: ``execute_each(..., multi=True)``); the start of the jobs
a pop took stays a script (docs/decisions.md, "Where the server's CPU goes").

The keys are not declared (passed as arguments): fine on a single Redis and Sentinel, which is
what this project runs (docs/decisions.md); a Redis Cluster would need them declared.
"""

import functools

import redis
from redis.exceptions import ExecAbortError, NoScriptError

from queues.connection import combine, wire

BATCH_LUA = """
local wanted, errors, numbers = {}, {}, true
local i, n, c = 1, #ARGV, 0
while i <= n do
  local argc = tonumber(ARGV[i])
  local want = argc < 0
  if want then argc = -argc end
  c = c + 1
  local r = redis.pcall(unpack(ARGV, i + 1, i + argc))
  if type(r) == 'table' and r.err then
    errors[#errors + 1] = c
    errors[#errors + 1] = r.err
    if want then wanted[#wanted + 1] = false end
  elseif want then
    wanted[#wanted + 1] = r
    if type(r) ~= 'number' then numbers = false end
  end
  i = i + argc + 1
end
if #errors == 0 and numbers then
  return table.concat(wanted, ',')
end
return {wanted, errors}
"""

NOT_IN_A_SCRIPT = {
    "EVAL",
    "EVALSHA",
    "EVAL_RO",
    "EVALSHA_RO",
    "FCALL",
    "SCRIPT",
    "MULTI",
    "EXEC",
    "WATCH",
    "BLPOP",
    "BRPOP",
    "BLMOVE",
    "BZPOPMIN",
    "BZPOPMAX",
    "SUBSCRIBE",
}
_scripts: dict[int, redis.commands.core.Script] = {}  # id(connection) -> its Script (its sha computed once)


def _script(connection):
    script = _scripts.get(id(connection))
    if script is None or script.registered_client is not connection:
        script = _scripts[id(connection)] = connection.register_script(BATCH_LUA)
    return script


def runs_as_a_script(pipe):
    """Whether the commands queued on ``pipe`` can run as one call of ``BATCH_LUA``: no script of their own, no
    command a script may not call, and no WATCH (a watched MULTI must be the EXEC that checks it)."""
    if pipe.scripts or getattr(pipe, "watching", False):
        return False
    return not any(str(args[0]).upper() in NOT_IN_A_SCRIPT for args, _options in pipe.command_stack)


def execute_each(connection, pipe, *, multi=False):
    """Run the commands queued on ``pipe`` in one round trip -> one entry per command, ``None`` for one that applied
    and a ``redis.ResponseError`` for one that failed (the others applied, as in a MULTI's EXEC). The shape of
    ``Pipeline.execute(raise_on_error=False)`` where only the failures matter. The caller checks
    ``runs_as_a_script`` first (no script of its own, no WATCH: what both ways below need).

    As one call of ``BATCH_LUA`` (one command to Redis's count: the starts of the jobs one pop took,
    worker/attempt.py), or with ``multi`` as MULTI ... EXEC read back raw (``execute_multi``'s way; the enqueue's
    write, producer/write.py). The MULTI is a command more and costs the server less: 40-42 µs of Redis CPU an
    enqueue against 57-65 as the script, and the client 201-211 µs against 226-242 (20,000 single enqueues, three
    alternated pairs, issue 36): Lua makes a string of each of the job hash's ~25 arguments and converts each
    command's arguments and reply both ways. A command Redis refuses when queued (an arity error, an ACL's NOPERM,
    OOM) makes EXEC answer EXECABORT: nothing of the MULTI applied, and that refusal is raised."""
    if multi:
        if not pipe.command_stack:
            pipe.reset()
            return []
        replies, _after = _exec(connection, pipe)
        return [reply if isinstance(reply, redis.ResponseError) else None for reply in replies]
    count = len(pipe.command_stack)
    argv = _argv(pipe)
    try:
        _wanted, errors = _replies(_script(connection)(args=argv)) if argv else ([], [])
    finally:
        pipe.reset()
    replies: list[redis.ResponseError | None] = [None] * count
    for number, message in zip(errors[::2], errors[1::2]):
        text = message.decode() if isinstance(message, bytes) else str(message)
        replies[int(number) - 1] = redis.ResponseError(text)
    return replies


def execute(connection, pipe, want=()):
    """Run the commands queued on ``pipe`` (made by ``connection.pipeline()``) in one call on
    ``connection``; -> {index: reply} for the indexes in ``want`` (raw replies: integers, bytes,
    lists). Raises ``redis.ResponseError`` (the first command that failed, the others applied)
    or what the connection raises; ``pipe`` is reset either way."""
    if pipe.scripts or any(str(args[0]).upper() in NOT_IN_A_SCRIPT for args, _options in pipe.command_stack):
        replies = pipe.execute()  # a script queued (rq's limit promotion): a script cannot call one
        return {index: replies[index] for index in want}
    want = set(want)
    argv = _argv(pipe, want)
    try:
        if not argv:
            return {}
        wanted, errors = _replies(_call(connection, argv))
    finally:
        pipe.reset()
    if errors:
        number, message = errors[0], errors[1]
        message = message.decode() if isinstance(message, bytes) else message
        raise redis.ResponseError(f"Command # {number} of the batch caused error: {message}")
    return dict(zip(sorted(want), wanted))


def _argv(pipe, want=frozenset()):
    """The commands queued on ``pipe`` as ``BATCH_LUA``'s arguments: each one's count, then its arguments (the count
    negative for a command whose reply is wanted: its index in ``want``)."""
    argv = []
    for index, (args, _options) in enumerate(pipe.command_stack):
        argv.append(-len(args) if index in want else len(args))
        argv.extend(args)
    return argv


def _call(connection, argv):
    """``BATCH_LUA`` called with ``argv`` -> its raw reply; with other threads' batches in one round trip when the
    client's batches are combined (``combine.py``), else on its own (redis-py's ``Script``, which loads the script
    when the server does not have it)."""
    script = _script(connection)
    combiner = combine.of(connection)
    if combiner is not None:
        try:
            return combiner.run([("EVALSHA", script.sha, 0, *argv)], combine.read_one)
        except NoScriptError:
            pass  # loaded by the call below
    return script(args=argv)


def _replies(reply):
    """``BATCH_LUA``'s answer -> (the replies asked for, [command number, error, ...]): one string of integers
    (``"3,0"``) when nothing failed and every reply asked for is an integer, else the two arrays."""
    if isinstance(reply, bytes | str):
        text = reply.decode() if isinstance(reply, bytes) else reply
        return ([int(number) for number in text.split(",")] if text else []), []
    return reply


def execute_multi(connection, pipe, want=(), then=None):
    """``execute``'s contract, sent as MULTI ... EXEC instead of one call of ``BATCH_LUA``: cheaper for the server
    (no Lua string for each argument, no conversion of each command's arguments and reply), a little dearer for
    the client (N + 2 replies read, not one). The worker's success, the batch with the most arguments (the whole
    job hash), goes this way: 194,000 instructions of redis-server for its commands as the script, 113,000 as the
    MULTI (callgrind, issue 36). redis-py's own ``execute`` of the MULTI would parse each reply through its
    response callback; here the MULTI's and each command's QUEUED are read and dropped, and EXEC's array is
    read raw. Falls back to ``pipe.execute()`` for a pipeline holding a script of its own or a WATCH.

    ``then``: one more command (a tuple of its arguments) sent after the EXEC in the same round trip, run only once
    the MULTI has; its raw reply (an error as a ``redis.ResponseError``, not raised) comes back under the key
    ``"then"``. The fork-free worker's next pop rides on its success this way (``intake.Intake.pop_ahead``). Left
    unsent (no ``"then"`` key) where the MULTI falls back to ``pipe.execute()``."""
    if pipe.scripts or getattr(pipe, "watching", False):
        replies = pipe.execute()
        return {index: replies[index] for index in want}
    if not pipe.command_stack:
        pipe.reset()
        return {}
    replies, after = _exec(connection, pipe, then)
    for number, reply in enumerate(replies, start=1):
        if isinstance(reply, redis.ResponseError):
            raise redis.ResponseError(f"Command # {number} of the batch caused error: {reply}")
    answer = {index: replies[index] for index in want}
    if then is not None:
        answer["then"] = after
    return answer


def _exec(connection, pipe, then=None):
    """Send ``pipe``'s commands as MULTI ... EXEC on a connection of ``connection``'s pool, then ``then`` (a
    command, or None) -> (EXEC's replies, raw: a failed command's error as a ``redis.ResponseError`` in its place;
    ``then``'s reply, or its error, or None). ``pipe`` is reset either way."""
    commands = [("MULTI",), *(args for args, _options in pipe.command_stack), ("EXEC",)]
    pipe.reset()
    combiner = combine.of(connection)
    if combiner is not None and then is None:  # with other threads' batches in one round trip
        return combiner.run(commands, functools.partial(_read_multi, sent=len(commands)), transaction=True), None
    pool = connection.connection_pool
    conn = pool.get_connection()
    after = None
    try:
        conn.send_packed_command(wire.pack(conn, [*commands, *([then] if then else [])]))
        replies = _read_multi(conn, len(commands))
        if then:
            try:
                after = conn.read_response()
            except redis.ResponseError as exc:
                after = exc
    except BaseException:
        conn.disconnect()  # a reply may be left unread on it
        raise
    finally:
        pool.release(conn)
    return replies, after


def _read_multi(conn, sent):
    """The replies of MULTI, its commands and EXEC (``sent`` of them in all) read from ``conn`` -> EXEC's array,
    raw; raises the error of a command refused when queued (EXEC then answers EXECABORT)."""
    refused = None
    for _ in range(sent - 1):  # the MULTI's OK, then one QUEUED per command
        try:
            conn.read_response()
        except redis.ResponseError as exc:  # refused when queued (arity): EXEC then answers EXECABORT
            refused = refused or exc
    try:
        return conn.read_response()
    except ExecAbortError:
        raise refused or redis.ResponseError("EXECABORT") from None
