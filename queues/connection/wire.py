"""Commands packed into Redis's protocol for the worker's own round trips (``batch.py``, ``combine.py``).

redis-py packs each command with hiredis's ``pack_command`` too, but first walks its arguments in Python (a
generator and two ``isinstance`` checks per argument, to turn a ``bytearray`` or ``memoryview`` into bytes and
to split a first argument holding a space, ``"CLIENT SETNAME"``). A success's MULTI is ~22 commands and ~60
arguments: 73 µs of packing through redis-py, 22 µs through hiredis directly (``timeit``, issue 36), per job.
So ``pack`` hands the commands to hiredis as they are, and only a batch hiredis refuses (an argument of another
type) or whose first argument holds a space goes through redis-py's own packing, which converts what it can and
raises its ``DataError`` for the rest, exactly as before. Without hiredis installed, redis-py's packing it is.
"""

from collections.abc import Sequence
from typing import Any

try:
    from hiredis import pack_command  # optional, as for redis-py: without it, redis-py packs (below)
except ImportError:  # pragma: no cover — hiredis is in requirements.txt; redis-py packs without it
    pack_command = None  # type: ignore[assignment]


def pack(conn: Any, commands: Sequence[tuple[Any, ...]]) -> Any:
    """``commands`` (tuples of arguments) in Redis's protocol: the buffers ``conn.send_packed_command`` sends."""
    if pack_command is not None:
        try:  # (a command name given as bytes raises TypeError on the space test: redis-py's packing then)
            packed = [pack_command(command) for command in commands if " " not in command[0]]
        except TypeError:  # an argument hiredis does not take as it is (a bytearray, None): redis-py decides
            packed = None
        if packed is not None and len(packed) == len(commands):
            return [b"".join(packed)]  # a list of buffers, as redis-py's (it sends each item)
    return conn.pack_commands(commands)
