"""queues/connection/batch.py: a pipeline's commands as one EVALSHA, with a MULTI's semantics."""

import pytest
import redis

from queues.connection import batch
from queues.keyspace import keys


def _key(name):
    return f"{keys.job_key_prefix()}batch-test-{name}"


def test_the_commands_apply_in_one_call_and_only_the_wanted_replies_come_back(queue_redis):
    pipe = queue_redis.pipeline()
    pipe.hset(_key("h"), mapping={"a": 1, "b": "x"})
    pipe.expire(_key("h"), 100)
    pipe.sadd(_key("s"), "m", "n")
    pipe.scard(_key("s"))
    pipe.zadd(_key("z"), {"j": 1.5})
    assert batch.execute(queue_redis, pipe, want=(3,)) == {3: 2}
    assert queue_redis.hgetall(_key("h")) == {b"a": b"1", b"b": b"x"}
    assert 0 < queue_redis.ttl(_key("h")) <= 100
    assert queue_redis.zscore(_key("z"), "j") == 1.5
    assert pipe.command_stack == []


def test_a_failing_command_fails_alone_as_in_a_multi_and_its_error_is_raised(queue_redis):
    queue_redis.set(_key("str"), "1")
    pipe = queue_redis.pipeline()
    pipe.sadd(_key("before"), "x")
    pipe.sadd(_key("str"), "y")  # WRONGTYPE
    pipe.sadd(_key("after"), "z")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        batch.execute(queue_redis, pipe)
    assert queue_redis.smembers(_key("before")) == {b"x"}
    assert queue_redis.smembers(_key("after")) == {b"z"}


def test_a_pipeline_holding_a_script_runs_as_its_multi(queue_redis):
    script = queue_redis.register_script("return redis.call('INCR', KEYS[1])")
    pipe = queue_redis.pipeline()
    pipe.incr(_key("n"))
    script(keys=[_key("n")], client=pipe)
    assert batch.execute(queue_redis, pipe, want=(1,)) == {1: 2}


def test_integer_replies_come_back_as_one_string_and_others_as_arrays(queue_redis):
    """The script answers integers asked for as one string (one write(2) of redis-server), anything else as the
    arrays; execute gives the same replies either way."""
    script = batch._script(queue_redis)
    assert script(args=[-3, "SADD", _key("one"), "x", 3, "SADD", _key("one"), "y", -2, "SCARD", _key("one")]) == b"1,2"
    assert script(args=[3, "SADD", _key("one"), "z"]) == b""
    assert script(args=[-3, "HGET", _key("none"), "f"]) == [[None], []]
    pipe = queue_redis.pipeline()
    pipe.set(_key("str"), "v")
    pipe.get(_key("str"))
    pipe.scard(_key("one"))
    assert batch.execute(queue_redis, pipe, want=(1, 2)) == {1: b"v", 2: 3}


@pytest.mark.parametrize("run", [batch.execute, batch.execute_multi], ids=["script", "multi"])
def test_both_ways_apply_every_command_and_give_the_replies_asked_for(queue_redis, run):
    pipe = queue_redis.pipeline()
    pipe.hset(_key(f"h-{run.__name__}"), mapping={"a": 1})
    pipe.set(_key(f"s-{run.__name__}"), "v")
    pipe.get(_key(f"s-{run.__name__}"))
    pipe.expire(_key(f"h-{run.__name__}"), 100)
    assert run(queue_redis, pipe, want=(2, 3)) == {2: b"v", 3: 1}
    assert queue_redis.hget(_key(f"h-{run.__name__}"), "a") == b"1"
    assert pipe.command_stack == []


def test_a_failing_command_of_a_multi_fails_alone_and_its_error_is_raised(queue_redis):
    queue_redis.set(_key("str-m"), "1")
    pipe = queue_redis.pipeline()
    pipe.sadd(_key("before-m"), "x")
    pipe.sadd(_key("str-m"), "y")  # WRONGTYPE
    pipe.sadd(_key("after-m"), "z")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        batch.execute_multi(queue_redis, pipe)
    assert queue_redis.smembers(_key("before-m")) == {b"x"}
    assert queue_redis.smembers(_key("after-m")) == {b"z"}
    assert queue_redis.ping()  # the connection the MULTI used went back to the pool with nothing left unread


def test_a_command_refused_when_queued_aborts_the_multi_and_is_raised(queue_redis):
    pipe = queue_redis.pipeline()
    pipe.sadd(_key("aborted"), "x")
    pipe.execute_command("HSET", _key("odd"), "field-without-value")  # wrong number of arguments
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        batch.execute_multi(queue_redis, pipe)
    assert not queue_redis.exists(_key("aborted"))  # EXECABORT: nothing applied
    assert queue_redis.ping()


def test_a_command_sent_after_the_multi_runs_once_it_has_and_its_error_comes_back_unraised(queue_redis):
    """``then`` (the fork-free worker's next pop riding on its success): run after the EXEC, in the same round
    trip; its reply, or its error (NOSCRIPT after a restart, WRONGTYPE), comes back under "then", never raised."""
    pipe = queue_redis.pipeline()
    pipe.rpush(_key("then-list"), "a")
    replies = batch.execute_multi(queue_redis, pipe, want=(0,), then=("LRANGE", _key("then-list"), 0, -1))
    assert replies == {0: 1, "then": [b"a"]}  # it saw what the MULTI wrote
    pipe.rpush(_key("then-list"), "b")
    replies = batch.execute_multi(queue_redis, pipe, then=("EVALSHA", "0" * 40, 0))
    assert isinstance(replies["then"], redis.exceptions.NoScriptError)
    assert queue_redis.lrange(_key("then-list"), 0, -1) == [b"a", b"b"]
    assert queue_redis.ping()  # nothing left unread on the connection


def test_each_command_s_error_comes_back_in_its_place_and_the_others_apply(queue_redis):
    """``execute_each``: one call; a failing command fails alone (as in a MULTI) and its error is in its place, the
    others are ``None`` (the enqueue's write, and the starts of the jobs one pop took: worker/attempt.py)."""
    queue_redis.set(_key("str"), "1")
    pipe = queue_redis.pipeline()
    pipe.sadd(_key("first"), "a")
    pipe.sadd(_key("str"), "c")  # WRONGTYPE
    pipe.zadd(_key("third"), {"d": 2})
    replies = batch.execute_each(queue_redis, pipe)
    assert replies[0] is None and replies[2] is None
    assert isinstance(replies[1], redis.ResponseError) and "WRONGTYPE" in str(replies[1])
    assert queue_redis.smembers(_key("first")) == {b"a"} and queue_redis.zscore(_key("third"), "d") == 2
    assert pipe.command_stack == []


def test_as_a_multi_each_command_s_error_comes_back_in_its_place_and_a_refused_one_applies_nothing(queue_redis):
    """``execute_each(..., multi=True)`` (the enqueue's write: MULTI ... EXEC read back raw): a command that fails
    when run fails alone, its error in its place, the others applied, as the script does; a command Redis refuses
    when queued (here an arity error) makes the whole MULTI apply nothing, and its refusal is raised."""
    queue_redis.set(_key("str"), "1")
    pipe = queue_redis.pipeline()
    pipe.sadd(_key("first"), "a")
    pipe.sadd(_key("str"), "c")  # WRONGTYPE
    pipe.zadd(_key("third"), {"d": 2})
    replies = batch.execute_each(queue_redis, pipe, multi=True)
    assert replies[0] is None and replies[2] is None
    assert isinstance(replies[1], redis.ResponseError) and "WRONGTYPE" in str(replies[1])
    assert queue_redis.smembers(_key("first")) == {b"a"} and queue_redis.zscore(_key("third"), "d") == 2
    assert pipe.command_stack == []
    pipe.sadd(_key("refused"), "a")
    pipe.execute_command("ZADD", _key("refused-z"))  # wrong number of arguments: refused when queued
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        batch.execute_each(queue_redis, pipe, multi=True)
    assert not queue_redis.exists(_key("refused")), "nothing of the refused MULTI applied"
    assert pipe.command_stack == [] and queue_redis.ping()
