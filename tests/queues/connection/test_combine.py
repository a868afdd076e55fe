"""queues/connection/combine.py: several threads' batches in one round trip, each with its own replies."""

import threading

import pytest
import redis

from queues.connection import batch, combine
from queues.keyspace import keys


def _key(name):
    return f"{keys.job_key_prefix()}combine-test-{name}"


@pytest.fixture
def client(queue_redis):
    """A client of its own (the app's is shared), its batches combined."""
    own = redis.Redis(connection_pool=redis.ConnectionPool(**queue_redis.connection_pool.connection_kwargs))
    combine.enable(own)
    yield own
    combine.disable(own)
    own.connection_pool.disconnect()


@pytest.fixture
def counted(private_redis):
    """A client of a redis-server of this test's own, its batches combined: its commandstats are this test's."""
    own = redis.Redis.from_url(private_redis.url)
    combine.enable(own)
    yield own
    combine.disable(own)
    own.connection_pool.disconnect()


def _read_one(conn):
    return conn.read_response()


def _held(combiner, waiting, reading):
    """A reader that sets ``reading`` and holds its round trip open until ``waiting`` other batches queued up
    behind it."""

    def read(conn):
        reading.set()
        while True:
            with combiner._lock:
                if len(combiner._pending) >= waiting:
                    break
            threading.Event().wait(0.005)
        return conn.read_response()

    return read


def _run_into(outcomes, combiner, name, commands, read, transaction=False):
    """``combiner.run`` (in a thread of its own): its answer, or the error it raised, kept under ``name``."""
    try:
        outcomes[name] = combiner.run(commands, read, transaction=transaction)
    except (redis.RedisError, OSError) as exc:
        outcomes[name] = exc


def _started(outcomes, combiner, *calls):
    """A thread for each (name, commands, read[, transaction]) of ``calls``, started -> the threads."""
    threads = [threading.Thread(target=_run_into, args=(outcomes, combiner, *call)) for call in calls]
    for thread in threads:
        thread.start()
    return threads


def _first_on_its_way(outcomes, combiner, waiting):
    """A PING (its answer kept under "first") whose round trip is on its way and stays open until ``waiting``
    batches queued up behind it -> its thread."""
    reading = threading.Event()
    (first,) = _started(outcomes, combiner, ("first", [("PING",)], _held(combiner, waiting, reading)))
    assert reading.wait(10)  # its round trip is on its way: what comes now queues up
    return first


def test_a_lone_batch_is_sent_at_once_in_a_round_trip_of_its_own(client):
    combiner = combine.of(client)
    for n in range(3):
        replies = combiner.run(
            [("SET", _key("lone"), n), ("GET", _key("lone"))], lambda c: (_read_one(c), _read_one(c))
        )
        assert replies == (b"OK", str(n).encode())
    assert (combiner.round_trips, combiner.batches) == (3, 3)


def test_batches_that_queue_up_behind_one_on_its_way_go_together_each_with_its_own_replies(client):
    combiner = combine.of(client)
    others = 12
    got = {}
    first = _first_on_its_way(got, combiner, others)

    def both(conn):
        return (conn.read_response(), conn.read_response())

    threads = _started(
        got, combiner, *((n, [("SET", _key(f"k{n}"), n), ("INCRBY", _key("sum"), n + 1)], both) for n in range(others))
    )
    for thread in [first, *threads]:
        thread.join(10)
    assert (combiner.round_trips, combiner.batches) == (2, others + 1)
    assert got.pop("first") == b"PONG"
    assert sorted(got) == list(range(others))
    total = sum(range(1, others + 1))
    assert all(reply[0] == b"OK" and 1 <= reply[1] <= total for reply in got.values())
    assert len({reply[1] for reply in got.values()}) == others  # each its own INCRBY's running total
    assert client.get(_key("sum")) == str(total).encode()
    assert [client.get(_key(f"k{n}")) for n in range(others)] == [str(n).encode() for n in range(others)]


def test_an_error_of_one_batch_is_its_own_and_the_others_apply(client):
    combiner = combine.of(client)
    client.set(_key("str"), "x")
    outcomes = {}
    first = _first_on_its_way(outcomes, combiner, 3)
    multi = ("MULTI",), ("SADD", _key("str"), "y"), ("SADD", _key("set"), "z"), ("EXEC",)
    refused = ("MULTI",), ("SADD", _key("before")), ("EXEC",)  # SADD without a member: refused when queued
    threads = _started(
        outcomes,
        combiner,
        ("wrongtype", list(multi), lambda c: batch._read_multi(c, 4), True),
        ("refused", list(refused), lambda c: batch._read_multi(c, 3), True),
        ("after", [("SADD", _key("after"), "a")], _read_one),
    )
    for thread in [first, *threads]:
        thread.join(10)
    assert combiner.round_trips == 2
    assert outcomes["first"] == b"PONG"
    wrongtype, applied = outcomes["wrongtype"]
    assert isinstance(wrongtype, redis.ResponseError) and "WRONGTYPE" in str(wrongtype) and applied == 1
    refusal = outcomes["refused"]
    assert isinstance(refusal, redis.ResponseError) and "wrong number of arguments" in str(refusal)
    assert outcomes["after"] == 1
    assert client.smembers(_key("set")) == {b"z"} and client.exists(_key("before")) == 0


def _calls(before, after, name):
    return after.get(f"cmdstat_{name}", {}).get("calls", 0) - before.get(f"cmdstat_{name}", {}).get("calls", 0)


def test_transactions_of_one_write_go_as_one_multi_each_with_its_own_replies(counted):
    client = counted
    combiner = combine.of(client)
    client.set(_key("planted"), "x")
    others = 6
    before = client.info("commandstats")
    got = {}
    first = _first_on_its_way(got, combiner, others + 1)

    def transaction(n):
        return [("MULTI",), ("SET", _key(f"t{n}"), n), ("INCRBY", _key("tsum"), n + 1), ("EXEC",)]

    planted = [("MULTI",), ("SADD", _key("planted"), "y"), ("SADD", _key("tset"), "z"), ("EXEC",)]
    threads = _started(
        got,
        combiner,
        *((n, transaction(n), lambda c: batch._read_multi(c, 4), True) for n in range(others)),
        ("planted", planted, lambda c: batch._read_multi(c, 4), True),
    )
    for thread in [first, *threads]:
        thread.join(10)
    after = client.info("commandstats")
    assert combiner.round_trips == 2
    assert (_calls(before, after, "multi"), _calls(before, after, "exec")) == (1, 1)  # seven transactions, one EXEC
    assert got.pop("first") == b"PONG"
    wrongtype, added = got.pop("planted")
    assert isinstance(wrongtype, redis.ResponseError) and "WRONGTYPE" in str(wrongtype) and added == 1
    total = sum(range(1, others + 1))
    assert sorted(got) == list(range(others))
    assert all(reply[0] == b"OK" and 1 <= reply[1] <= total for reply in got.values())
    assert len({reply[1] for reply in got.values()}) == others  # each its own INCRBY's running total
    assert client.get(_key("tsum")) == str(total).encode()
    assert [client.get(_key(f"t{n}")) for n in range(others)] == [str(n).encode() for n in range(others)]


def test_a_transaction_refused_when_queued_fails_alone_the_others_of_its_write_apply_on_their_own(counted):
    client = counted
    combiner = combine.of(client)
    before = client.info("commandstats")
    outcomes = {}
    first = _first_on_its_way(outcomes, combiner, 4)
    good = [("MULTI",), ("INCR", _key("good")), ("EXEC",)]
    refused = [("MULTI",), ("INCR", _key("bad")), ("SADD", _key("bad-set")), ("EXEC",)]  # SADD without a member
    threads = _started(
        outcomes,
        combiner,
        ("one", list(good), lambda c: batch._read_multi(c, 3), True),
        ("refused", refused, lambda c: batch._read_multi(c, 4), True),
        ("two", list(good), lambda c: batch._read_multi(c, 3), True),
        ("plain", [("INCR", _key("plain"))], _read_one),
    )
    for thread in [first, *threads]:
        thread.join(10)
    after = client.info("commandstats")
    assert outcomes["first"] == b"PONG" and outcomes["plain"] == 1
    refusal = outcomes["refused"]
    assert isinstance(refusal, redis.ResponseError) and "wrong number of arguments" in str(refusal)
    assert sorted([outcomes["one"], outcomes["two"]]) == [[1], [2]]  # each applied once, on its own
    assert client.get(_key("good")) == b"2" and client.exists(_key("bad"), _key("bad-set")) == 0
    assert _calls(before, after, "exec") == 1 + 3  # the merged one aborted, then each of the three again
    assert _calls(before, after, "incr") == 1 + 2  # plain's, and the two good ones' once each


def test_a_connection_lost_mid_write_fails_that_batch_and_the_ones_after_it_then_the_next_call_reconnects(client):
    combiner = combine.of(client)
    outcomes = {}

    def lose(conn):  # the connection drops before this batch's replies are read, as redis-py then raises
        conn.disconnect()
        raise redis.ConnectionError("Connection closed by server.")

    first = _first_on_its_way(outcomes, combiner, 2)
    (second,) = _started(outcomes, combiner, ("second", [("INCR", _key("n"))], lose))
    while len(combiner._pending) < 1:
        threading.Event().wait(0.001)
    (third,) = _started(outcomes, combiner, ("third", [("INCR", _key("n"))], _read_one))
    for thread in (first, second, third):
        thread.join(10)
    assert outcomes["first"] == b"PONG"
    assert isinstance(outcomes["second"], redis.ConnectionError | OSError)
    assert isinstance(outcomes["third"], redis.ConnectionError | OSError)  # its replies came after the loss
    assert combiner.run([("PING",)], _read_one) == b"PONG"  # a new connection of the pool answers
    assert combiner.round_trips == 3


def test_the_worker_batches_give_the_same_answers_combined(client):
    pipe = client.pipeline()
    pipe.hset(_key("h"), mapping={"a": 1})
    pipe.sadd(_key("s"), "m", "n")
    pipe.scard(_key("s"))
    assert batch.execute(client, pipe, want=(2,)) == {2: 2}
    pipe = client.pipeline()
    pipe.hset(_key("h"), "b", "x")
    pipe.expire(_key("s"), 100)
    assert batch.execute_multi(client, pipe, want=(1,)) == {1: 1}
    assert client.hgetall(_key("h")) == {b"a": b"1", b"b": b"x"}
    assert combine.of(client).round_trips == 2


def test_a_script_the_server_lost_is_loaded_again(client):
    client.script_flush()
    pipe = client.pipeline()
    pipe.incr(_key("after-flush"))
    assert batch.execute(client, pipe, want=(0,)) == {0: 1}
    assert client.get(_key("after-flush")) == b"1"


def test_redis_away_when_batches_are_to_go_fails_each_of_them_with_the_error_of_its_own_round_trip(client, monkeypatch):
    combiner = combine.of(client)
    outcomes = {}
    first = _first_on_its_way(outcomes, combiner, 3)  # it has its connection; the next batch's will not connect

    def unreachable(*args, **kwargs):
        raise redis.ConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    monkeypatch.setattr(client.connection_pool, "get_connection", unreachable)
    others = _started(outcomes, combiner, *((n, [("INCR", _key("away"))], _read_one) for n in range(3)))
    for thread in [first, *others]:
        thread.join(10)
    assert outcomes["first"] == b"PONG"
    assert [type(outcomes[n]) for n in range(3)] == [redis.ConnectionError] * 3
    monkeypatch.undo()
    assert client.get(_key("away")) is None  # none of them was sent
