"""queues/connection/wire.py: the worker's batches packed by hiredis directly, redis-py's packing where it must."""

import pytest
import redis

from queues.connection import batch, wire
from queues.keyspace import keys


def _key(name):
    return f"{keys.job_key_prefix()}wire-test-{name}"


def _sent(queue_redis, commands):
    """What ``wire.pack`` and redis-py's own packing make of ``commands``, as bytes each."""
    conn = queue_redis.connection_pool.make_connection()
    return b"".join(wire.pack(conn, commands)), b"".join(conn.pack_commands(commands))


def test_a_batch_is_packed_byte_for_byte_as_redis_py_packs_it(queue_redis):
    commands = [
        ("MULTI",),
        ("HSET", _key("h"), "status", "finished", "count", 3, "seconds", 0.125, b"raw", b"\x00\xff", "text", "été"),
        ("ZADD", _key("z"), 1765040000.123456, "j"),
        ("EXPIRE", _key("h"), 86400),
        ("EXEC",),
    ]
    ours, theirs = _sent(queue_redis, commands)
    assert ours == theirs


def test_what_hiredis_does_not_take_goes_through_redis_py_as_before(queue_redis):
    """A bytearray or a memoryview redis-py turns into bytes; a command name holding a space it splits; a None it
    refuses with its DataError: each batch holding one is redis-py's to pack, whole."""
    for commands in (
        [("SET", _key("a"), bytearray(b"xy")), ("GET", _key("a"))],
        [("SET", _key("a"), memoryview(b"xy"))],
        [("CLIENT SETNAME", "wire-test"), ("PING",)],
        [(b"PING",)],
    ):
        ours, theirs = _sent(queue_redis, commands)
        assert ours == theirs
    conn = queue_redis.connection_pool.make_connection()
    with pytest.raises(redis.DataError):
        wire.pack(conn, [("SET", _key("a"), None)])


def test_a_multi_packed_here_runs_on_redis_with_its_replies_in_order(queue_redis):
    pipe = queue_redis.pipeline()
    pipe.hset(_key("m"), mapping={"a": bytearray(b"1"), "b": 2.5})  # the bytearray: redis-py's packing, same result
    pipe.hincrby(_key("m"), "c", 4)
    pipe.expire(_key("m"), 100)
    assert batch.execute_multi(queue_redis, pipe, want=(0, 1, 2)) == {0: 2, 1: 4, 2: 1}
    assert queue_redis.hgetall(_key("m")) == {b"a": b"1", b"b": b"2.5", b"c": b"4"}
