"""The reporter of repeated problems (``queues/keyspace/repeats.py``): a line a minute with a count, all counted."""

import logging
import threading

import pytest
import redis

from queues.keyspace import entries, keys, quarantine, repeats


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def reporter(clock, queue_redis):
    queue_redis.delete(keys.quarantined_key())
    return repeats.Reporter(clock=clock)


@pytest.fixture
def log():
    return logging.getLogger("tests.repeats")


def lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "tests.repeats"]


def counted(connection):
    return {k.decode(): int(v) for k, v in connection.hgetall(keys.quarantined_key()).items()}


def drop(reporter, log, n, key="p:queue:default:high", connection=None):
    for i in range(n):
        reporter.report(
            repeats.DROPPED,
            key,
            "dropped job %s of %s: its hash is gone",
            f"bogus-{i}",
            key,
            log=log,
            connection=connection,
        )


def test_200000_bogus_ids_on_one_band_are_one_line_then_one_summary_and_all_counted(
    reporter, clock, log, caplog, queue_redis
):
    caplog.set_level(logging.INFO)
    drop(reporter, log, 200_000)
    clock.now += 59.9
    assert lines(caplog) == ["dropped job bogus-0 of p:queue:default:high: its hash is gone"]
    assert reporter.flush_due() == 0  # the window has not ended yet

    clock.now += 0.2
    assert reporter.flush_due() == 1  # and the counts not yet written
    assert lines(caplog)[1] == (
        "p:queue:default:high: 199999 more like it in the last 60 s (dropped; counted in /metrics as "
        "optima_quarantined_entries_total); the last: dropped job bogus-199999 of p:queue:default:high: "
        "its hash is gone"
    )
    assert counted(queue_redis) == {"dropped": 200_000}
    assert [r.levelno for r in caplog.records if r.name == "tests.repeats"] == [logging.ERROR, logging.ERROR]


def test_a_flood_that_goes_on_costs_at_most_two_lines_a_minute(reporter, clock, log, caplog, queue_redis):
    caplog.set_level(logging.INFO)
    for _minute in range(5):
        for _ in range(100):
            drop(reporter, log, 10)
            clock.now += 0.6  # 60 s a minute, 1,000 entries
    reporter.flush_due()
    assert len(lines(caplog)) <= 2 * 5
    assert counted(queue_redis) == {"dropped": 5000}
    assert "more like it" in lines(caplog)[1]


def test_the_next_occurrence_after_the_window_sums_it_up_then_is_logged_itself(reporter, clock, log, caplog):
    caplog.set_level(logging.INFO)
    drop(reporter, log, 3)
    clock.now += 61
    reporter.report(repeats.DROPPED, "p:queue:default:high", "later %s", "x", log=log)
    assert [line.split(" (")[0] for line in lines(caplog)] == [
        "dropped job bogus-0 of p:queue:default:high: its hash is gone",
        "p:queue:default:high: 2 more like it in the last 61 s",
        "later x",
    ]


def test_each_key_and_each_kind_is_reported_apart(reporter, log, caplog, queue_redis):
    caplog.set_level(logging.INFO)
    drop(reporter, log, 5, key="p:queue:a")
    drop(reporter, log, 5, key="p:queue:b")
    reporter.report(repeats.CORRUPT, "p:queue:a", "corrupt %s", "c1", log=log)
    reporter.report("made-up kind", "p:queue:a", "other %s", "o1", log=log)
    assert len(lines(caplog)) == 4
    assert counted(queue_redis) == {"dropped": 10, "corrupt": 1, "other": 1}


def test_past_max_keys_new_keys_share_one_line(clock, log, caplog, queue_redis):
    caplog.set_level(logging.INFO)
    queue_redis.delete(keys.quarantined_key())
    reporter = repeats.Reporter(clock=clock, max_keys=3)
    for i in range(1000):
        reporter.report(repeats.BAD_ENTRY, f"p:job:{i}", "bad %s", i, log=log)
    assert lines(caplog) == ["bad 0", "bad 1", "bad 2", "bad 3"]  # the 4th opened "(other keys)"
    clock.now += 60
    reporter.flush_due()
    assert lines(caplog)[-1].startswith("(other keys): 996 more like it")
    assert counted(queue_redis) == {"bad_entry": 1000}


def test_a_count_redis_did_not_take_is_written_with_the_next(reporter, clock, log, queue_redis):
    down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    drop(reporter, log, 7, connection=down)
    reporter.write_counts(down)
    assert reporter.unwritten() == {"dropped": 7}
    clock.now += repeats.RETRY_WRITE_SECONDS
    reporter.write_counts(queue_redis)
    assert (reporter.unwritten(), counted(queue_redis)) == ({}, {"dropped": 7})


def test_counts_are_written_at_most_once_a_second_between_lines(reporter, clock, log, queue_redis):
    drop(reporter, log, 1000)
    assert counted(queue_redis) == {"dropped": 1}  # with the first line; the rest waits for its second
    clock.now += repeats.WRITE_EVERY_SECONDS
    drop(reporter, log, 1)
    assert (counted(queue_redis), reporter.unwritten()) == ({"dropped": 1001}, {})


def test_threads_reporting_at_once_lose_no_count_and_log_once(reporter, log, caplog, queue_redis):
    caplog.set_level(logging.INFO)
    threads = [threading.Thread(target=drop, args=(reporter, log, 500)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reporter.write_counts(queue_redis)
    assert len(lines(caplog)) == 1
    assert counted(queue_redis) == {"dropped": 4000}


def test_entries_report_and_quarantine_go_through_the_reporter(queue_redis, caplog, monkeypatch, clock):
    caplog.set_level(logging.INFO)
    queue_redis.delete(keys.quarantined_key())
    reporter = repeats.Reporter(clock=clock)
    monkeypatch.setattr(repeats, "report", reporter.report)
    monkeypatch.setattr(repeats, "count", reporter.count)
    log = logging.getLogger("tests.repeats")
    monkeypatch.setattr(entries, "_reported", set())
    monkeypatch.setattr(entries, "MAX_REPORTED", 3)  # the first three named, each; then a line a minute
    for i in range(300):
        entries.report("p:optima:metrics:default:durations", f"entry {i} is not a duration", log=log)
    key = f"{keys.queue_key('default')}:flood"
    for i in range(50):
        queue_redis.sadd(key, b"\xff" + bytes([i]))
    quarantine.set_aside_members(queue_redis, [key], who="test", log=log)
    reporter.write_counts(queue_redis)  # the last second's
    assert [line.split(":")[-1] for line in lines(caplog)[:4]] == [
        " entry 0 is not a duration; skipped (shown as corrupt or left out)",
        " entry 1 is not a duration; skipped (shown as corrupt or left out)",
        " entry 2 is not a duration; skipped (shown as corrupt or left out)",
        " entry 3 is not a duration; skipped (shown as corrupt or left out)",
    ]
    assert len(lines(caplog)) == 5  # and one of the 50 members set aside
    assert counted(queue_redis) == {"bad_entry": 300, "not_utf8": 50}


def test_a_burst_names_its_first_occurrences_one_by_one_then_sums_up_the_rest(
    reporter, clock, log, caplog, queue_redis
):
    caplog.set_level(logging.INFO)
    for i in range(250):
        reporter.report(repeats.DROPPED, "ids", "job %s dropped", i, log=log, level=logging.WARNING, burst=100)
    assert lines(caplog) == [f"job {i} dropped" for i in range(100)]
    clock.now += 60.1
    assert reporter.flush_due() == 1
    assert lines(caplog)[100].startswith("ids: 150 more like it in the last 60 s (dropped;")
    assert lines(caplog)[100].endswith("the last: job 249 dropped")
    assert counted(queue_redis) == {"dropped": 250}
    reporter.report(repeats.DROPPED, "ids", "job %s dropped", "next", log=log, level=logging.WARNING, burst=100)
    assert lines(caplog)[-1] == "job next dropped"  # a new window names again


def test_a_flood_of_replayed_ids_is_a_bounded_number_of_warnings_each_naming_its_id(caplog, queue_redis):
    from queues.jobs import gate

    repeats.reporter.reset()
    caplog.set_level(logging.WARNING, logger="queues.worker")
    for i in range(5_000):
        gate.report_dropped(f"id-{i}", "popped from queue default but is finished")
    named = [r.getMessage() for r in caplog.records if r.name == "queues.worker"]
    assert len(named) == gate.DROPPED_NAMED_PER_MINUTE
    assert named[:2] == [
        "Job id-0 dropped, not run: popped from queue default but is finished",
        "Job id-1 dropped, not run: popped from queue default but is finished",
    ]
    repeats.reporter.reset()
