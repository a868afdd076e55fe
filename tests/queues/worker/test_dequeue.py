"""Dequeuer against the real Redis, in-process: priority order, paused queues, the intermediate list
(queues/worker/dequeue.py)."""

import redis

import queues
from queues.catalog.lookup import get_queue
from queues.keyspace import keys
from queues.worker import pause
from queues.worker.dequeue import Dequeuer


def _ids(connection, key):
    return [v.decode() for v in connection.lrange(key, 0, -1)]


def test_a_pop_takes_the_head_of_the_first_non_empty_queue_into_its_intermediate_list(queue_redis):
    default, orders = get_queue("default"), get_queue("orders-sync")
    queue_redis.rpush(orders.key, "o1", "o2")
    queue_redis.rpush(default.key, "d1")
    dequeuer = Dequeuer(queue_redis)
    assert dequeuer.pop([default, orders], None) == (default, "d1")
    assert dequeuer.pop([default, orders], None) == (orders, "o1")
    assert _ids(queue_redis, keys.intermediate_key(default.key)) == ["d1"]
    assert _ids(queue_redis, keys.intermediate_key(orders.key)) == ["o1"]
    assert _ids(queue_redis, orders.key) == ["o2"]


def test_a_paused_queue_is_skipped_atomically_and_reported(queue_redis):
    default, orders = get_queue("default"), get_queue("orders-sync")
    queue_redis.rpush(default.key, "d1")
    queue_redis.rpush(orders.key, "o1")
    pause.pause("default", queue_redis)
    dequeuer = Dequeuer(queue_redis)
    assert dequeuer.pop([default, orders], None) == (orders, "o1")
    assert dequeuer.pop([default, orders], None) is None
    assert dequeuer.paused == {"default"}
    assert _ids(queue_redis, default.key) == ["d1"]


def test_with_every_queue_paused_a_wait_sleeps_and_takes_nothing(queue_redis):
    default = get_queue("default")
    queue_redis.rpush(default.key, "d1")
    pause.pause("default", queue_redis)
    assert Dequeuer(queue_redis, pause_poll=0.1).pop([default], 5) is None
    assert _ids(queue_redis, default.key) == ["d1"]


def test_a_blocking_wait_on_one_queue_returns_a_job_pushed_meanwhile(queue_redis):
    import threading

    default = get_queue("default")
    threading.Timer(0.3, lambda: queue_redis.rpush(default.key, "late")).start()
    assert Dequeuer(queue_redis).pop([default], 5) == (default, "late")
    assert _ids(queue_redis, keys.intermediate_key(default.key)) == ["late"]


def test_a_job_popped_from_a_queue_paused_during_the_wait_goes_back_to_its_head(queue_redis):
    import threading

    default = get_queue("default")

    def pause_then_push():
        pause.pause("default", queue_redis)
        queue_redis.rpush(default.key, "late")

    dequeuer = Dequeuer(queue_redis)
    dequeuer.paused = set()
    # The script ran before the pause: now the blocking wait sees the push of a paused queue.
    original = dequeuer._pop_now
    dequeuer._pop_now = lambda queues: (threading.Timer(0.2, pause_then_push).start(), original(queues))[1]
    assert dequeuer.pop([default], 5) is None
    assert _ids(queue_redis, default.key) == ["late"]
    assert _ids(queue_redis, keys.intermediate_key(default.key)) == []
    assert dequeuer.paused == {"default"}


def test_a_pop_takes_the_high_band_then_the_normal_then_the_low_of_each_queue_in_order(queue_redis):
    default, orders = get_queue("default"), get_queue("orders-sync")
    high, normal, low = keys.band_keys(default.key)
    queue_redis.rpush(low, "l1")
    queue_redis.rpush(normal, "n1")
    queue_redis.rpush(high, "h1", "h2")
    queue_redis.rpush(keys.band_key(orders.key, "high"), "o1")
    dequeuer = Dequeuer(queue_redis)
    popped = [dequeuer.pop([default, orders], None) for _ in range(6)]
    assert popped == [(default, "h1"), (default, "h2"), (default, "n1"), (default, "l1"), (orders, "o1"), None]
    assert _ids(queue_redis, keys.intermediate_key(default.key)) == ["h1", "h2", "n1", "l1"]


def test_a_queue_given_a_priority_is_polled_so_a_push_to_its_high_band_during_the_wait_is_taken(queue_redis):
    import threading

    from queues.catalog.classes import mark_banded

    default = get_queue("default")
    mark_banded(queue_redis, "default")  # as every push to a band does
    dequeuer = Dequeuer(queue_redis)
    assert dequeuer.pop([default], 5) is None  # one short poll, not a BLMOVE on the normal band only
    assert dequeuer.banded == {"default"}
    threading.Timer(0.3, lambda: queue_redis.rpush(keys.band_key(default.key, "high"), "late")).start()
    for _ in range(40):  # short polls (at most 0.5 s each), never one wait of 5 s
        popped = dequeuer.pop([default], 5)
        if popped:
            break
    assert popped == (default, "late")


def test_a_high_band_of_the_wrong_type_is_set_aside_and_the_pop_goes_on(queue_redis):
    default = get_queue("default")
    high = keys.band_key(default.key, "high")
    queue_redis.set(high, "planted")
    queue_redis.rpush(default.key, "n1")
    assert Dequeuer(queue_redis).pop([default], None) == (default, "n1")
    assert queue_redis.exists(high) == 0
    assert len(list(queue_redis.scan_iter(high + ".corrupt-*"))) == 1


def test_a_pop_sent_ahead_is_the_first_look_and_an_error_in_its_place_pops_as_usual(queue_redis):
    """``Dequeuer.command`` is the pop's script as a command to send with other commands (``Intake.pop_ahead``); its
    reply, handed to ``sent``, is the next pop's first look; an error in its place (NOSCRIPT after a restart)
    is dropped and the pop looks again itself."""
    default = get_queue("default")
    first, second = (queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in (1, 2))
    dequeuer = Dequeuer(queue_redis)
    dequeuer.pop([default], None)  # the script is known to the server from here on
    dequeuer.sent([default], queue_redis.execute_command(*dequeuer.command([default])))
    found = dequeuer.pop([default], None)
    assert tuple(found) == (default, second.id) and found.data[b"status"] == b"queued"
    dequeuer.sent([default], redis.ResponseError("NOSCRIPT No matching script"))
    assert dequeuer.pop([default], None) is None
    assert queue_redis.lrange(default.key + ":intermediate", 0, -1) == [first.id.encode(), second.id.encode()]


def test_the_pop_answers_one_flat_array_whatever_it_pops_so_redis_6_writes_it_at_once(queue_redis):
    """redis-server 6.2 writes each nested array of a script's reply with a write(2) of its own (4 a pop of one job
    when the reply nested its entries and their hashes, issue 36): the pop's reply, started jobs with their hashes, a
    copy pushed twice, a job whose key is no hash, or none with queues paused and banded, holds no array."""
    from queues.worker.adapter import OptimaSimpleWorker

    default, orders = get_queue("default"), get_queue("orders-sync")
    started = [queues.enqueue("default", "tests.jobs.sample.add", n, 1) for n in (1, 2)]
    queue_redis.rpush(orders.key, "twice", "twice", "nohash")
    queue_redis.rpush(keys.intermediate_key(orders.key), "twice")
    worker = OptimaSimpleWorker([default, orders], connection=queue_redis)
    replies = []
    dequeuer = worker.intake.dequeuer
    run = dequeuer._run
    dequeuer._run = lambda *args: replies.append(run(*args)) or replies[-1]
    first = dequeuer.pop([default, orders], None, count=5)
    assert first.started is not None and first.data[b"status"] == b"queued"
    assert [job[1] for job in [first, *dequeuer.take_popped()]] == [started[0].id, started[1].id, "nohash"]
    pause.pause("default", queue_redis)
    queue_redis.set(keys.banded_key("orders-sync"), 1)
    assert dequeuer.pop([default, orders], None) is None
    assert dequeuer.paused == {"default"} and dequeuer.banded == {"orders-sync"}
    assert len(replies) == 2 and all(not isinstance(item, list) for reply in replies for item in reply)


def test_a_pop_of_several_takes_them_in_order_in_one_call_and_hands_them_out_one_by_one(queue_redis):
    """``count`` (the concurrent worker's free slots): one call of the script takes up to that many, across
    queues and bands in the worker's order, skipping a paused queue and a copy pushed twice; the next pops hand
    them out without Redis, and ``take_popped`` gives the caller those left."""
    default, orders, repricer = get_queue("default"), get_queue("orders-sync"), get_queue("repricer")
    queue_redis.rpush(keys.band_key(default.key, "high"), "h1")
    queue_redis.rpush(default.key, "d1", "d2")
    queue_redis.rpush(repricer.key, "r1")
    queue_redis.rpush(orders.key, "o1", "o2", "o3")
    queue_redis.rpush(keys.intermediate_key(orders.key), "o2")  # popped by another worker, not yet started
    pause.pause("repricer", queue_redis)
    dequeuer = Dequeuer(queue_redis)
    sent = []
    dequeuer.script = lambda keys, args, script=dequeuer.script: sent.append(args[1]) or script(keys=keys, args=args)
    assert dequeuer.pop([default, repricer, orders], None, count=6) == (default, "h1")
    assert sent == [6]
    assert [dequeuer.pop([default, repricer, orders], None, count=6) for _ in range(3)] == [
        (default, "d1"),
        (default, "d2"),
        (orders, "o1"),
    ]
    assert sent == [6], "handed out without a call"
    assert _ids(queue_redis, keys.intermediate_key(orders.key)) == ["o2", "o1", "o3"]  # o2's copy taken off
    assert dequeuer.take_popped() == [(orders, "o3")]
    assert dequeuer.pop([default, repricer, orders], None, count=6) is None
    assert _ids(queue_redis, repricer.key) == ["r1"] and dequeuer.paused == {"repricer"}


def test_a_pop_on_a_client_whose_round_trips_are_combined_goes_with_the_batches_queued_beside_it(queue_redis):
    """The concurrent and async workers combine their client's round trips (``connection/combine.py``): the main
    thread's pop goes with the jobs' starts and successes ready meanwhile, one write for them all, not a round trip
    of its own beside them (issue 36). A server that lost the script (NOSCRIPT) gets it loaded, and the pop goes on."""
    import threading

    from queues.connection import combine

    default = get_queue("default")
    own = redis.Redis(connection_pool=redis.ConnectionPool(**queue_redis.connection_pool.connection_kwargs))
    combiner = combine.enable(own)
    try:
        queue_redis.rpush(default.key, "j1", "j2")
        dequeuer = Dequeuer(own)
        reading, got = threading.Event(), {}

        def held(conn):  # a success on its way, its reply read once the pop queued up behind it (10 s at most)
            reading.set()
            queued = threading.Event()
            for _ in range(2000):
                if combiner._pending or queued.wait(0.005):
                    break
            return conn.read_response()

        success = threading.Thread(target=lambda: got.update(first=combiner.run([("PING",)], held)), daemon=True)
        success.start()
        assert reading.wait(10)
        assert dequeuer.pop([default], None) == (default, "j1")
        success.join(20)
        assert got == {"first": b"PONG"}
        assert (combiner.round_trips, combiner.batches) == (2, 2), "the pop went in the write after the success's"
        queue_redis.script_flush()
        assert dequeuer.pop([default], None) == (default, "j2")
        assert _ids(queue_redis, keys.intermediate_key(default.key)) == ["j1", "j2"]
    finally:
        combine.disable(own)
        own.connection_pool.disconnect()


def test_the_jobs_a_pop_of_several_holds_are_taken_for_giving_back_only_once_held_that_long(queue_redis):
    """``take_popped(held_over=...)`` (worker/prefetch.py's give-back, from another thread than the pops): nothing
    while the pop that took them is younger, or once none is held; else all of them, in order."""
    default = get_queue("default")
    queue_redis.rpush(default.key, "d1", "d2", "d3")
    dequeuer = Dequeuer(queue_redis)
    assert dequeuer.take_popped(held_over=0) == []  # nothing popped
    assert dequeuer.pop([default], None, count=3) == (default, "d1")
    assert dequeuer.take_popped(held_over=3600) == []
    assert list(dequeuer.popped) == [(default, "d2"), (default, "d3")]
    dequeuer.popped_at -= 2
    assert dequeuer.take_popped(held_over=1) == [(default, "d2"), (default, "d3")]
    assert not dequeuer.popped
