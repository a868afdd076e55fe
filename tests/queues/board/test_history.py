"""Recent history: once-a-minute samples of the cumulative counters (real Redis), per-minute
differences, the SVG the panel draws from them, and the job progress the panel shows."""

import json
import threading
import time
import xml.etree.ElementTree as ET

import pytest
from django.template.loader import render_to_string
from django.test import Client

from queues.board import history as board_history
from queues.keyspace import keys
from queues.metrics import history, store

SVG = "{http://www.w3.org/2000/svg}"
# A minute boundary a day ahead (unix seconds): the lock's EXAT must lie in Redis' future when the
# test runs, which can be many minutes after this module is imported (collection precedes the run).
T0 = (int(time.time()) // 60 + 24 * 60) * 60


def counters(redis_, queue, processed, failed):
    redis_.hset(store.counters_key(queue), mapping={store.PROCESSED: processed, store.FAILED: failed})


def test_one_sample_per_minute_whoever_asks(queue_redis):
    counters(queue_redis, "default", 5, 1)
    assert history.sample_if_due(queue_redis, at=T0 + 2) is True
    assert history.sample_if_due(queue_redis, at=T0 + 7) is False  # same minute: another worker sampled
    samples = history.read(queue_redis)
    assert len(samples) == 1
    assert samples[0][0] == T0 + 2
    assert samples[0][1]["default"] == (5, 1)
    assert samples[0][1]["content"] == (0, 0)  # every declared queue, counted or not
    # The lock expires at the start of the next minute (EXAT), in Redis' clock.
    seconds, micros = queue_redis.time()
    expires_ms = seconds * 1000 + micros // 1000 + queue_redis.pttl(keys.history_lock_key())
    assert abs(expires_ms - (T0 + 60) * 1000) < 100
    assert history.sample_if_due(queue_redis, at=T0 + 61) is False  # lock still held in Redis' clock
    queue_redis.delete(keys.history_lock_key())  # as its expiry at T0 + 60 would
    assert history.sample_if_due(queue_redis, at=T0 + 61) is True
    assert len(history.read(queue_redis)) == 2


def test_samples_give_completed_and_failed_per_minute(queue_redis):
    # processed counts every attempt that ended; completed = processed - failed.
    for minute, (processed, failed) in enumerate([(10, 2), (15, 3), (15, 3), (22, 3)]):
        counters(queue_redis, "default", processed, failed)
        history.sample(queue_redis, T0 + 60 * minute + 1)
    series = history.per_minute(history.read(queue_redis), now=T0 + 60 * 3 + 30)
    default = series["default"]
    assert len(default) == 60
    assert default[-1] == (T0 + 180, 7, 0)
    assert default[-2] == (T0 + 120, 0, 0)
    assert default[-3] == (T0 + 60, 4, 1)
    assert default[-4] == (T0, None, None)  # the first sample has nothing before it
    assert all(c is None for _, c, _ in default[:-3])


def test_a_counter_reset_counts_zero_not_negative(queue_redis):
    counters(queue_redis, "default", 100, 10)
    history.sample(queue_redis, T0)
    queue_redis.delete(store.counters_key("default"))  # e.g. a flushed Redis
    counters(queue_redis, "default", 3, 1)
    history.sample(queue_redis, T0 + 60)
    assert history.per_minute(history.read(queue_redis), now=T0 + 61)["default"][-1] == (T0 + 60, 0, 0)


def test_the_list_keeps_the_last_61_samples_and_an_hour_of_minutes(queue_redis):
    for minute in range(70):
        counters(queue_redis, "default", minute * 2, minute)
        history.sample(queue_redis, T0 + 60 * minute)
    assert queue_redis.llen(keys.history_key()) == 61
    samples = history.read(queue_redis)
    assert [t for t, _ in samples] == [T0 + 60 * m for m in range(9, 70)]
    minutes = history.per_minute(samples, now=T0 + 60 * 69 + 5)["default"]
    assert minutes == [(T0 + 60 * m, 1, 1) for m in range(10, 70)]


def test_garbage_in_the_history_list_is_skipped(queue_redis):
    counters(queue_redis, "default", 4, 0)
    history.sample(queue_redis, T0)
    queue_redis.lpush(
        keys.history_key(),
        b"\xff not json",
        json.dumps({"t": "x"}),
        json.dumps([1, 2]),
        json.dumps({"t": T0 + 30, "q": {"default": "nope"}}),
    )
    assert [t for t, _ in history.read(queue_redis)] == [T0, T0 + 30]  # the last one, with no usable count
    assert history.read(queue_redis)[1][1] == {}


def test_a_history_key_of_the_wrong_type_reads_as_no_history(queue_redis):
    queue_redis.set(keys.history_key(), "oops")
    assert history.read(queue_redis) == []


def _chart(name, minutes):
    root = ET.fromstring(str(board_history.chart(name, minutes)))
    assert root.tag == f"{SVG}svg"
    return root


def test_the_chart_is_well_formed_svg_with_one_group_per_minute():
    minutes = [(T0 + 60 * i, i % 3, i % 2) for i in range(59)] + [(T0 + 60 * 59, None, None)]
    root = _chart("default", minutes)
    groups = root.findall(f"{SVG}g")
    assert len(groups) == 60
    assert [g.get("data-minute") for g in groups] == [str(T0 + 60 * i) for i in range(60)]
    assert groups[4].get("data-completed") == "1" and groups[4].get("data-failed") == "0"
    assert groups[4].find(f"{SVG}title").text.endswith("UTC: 1 completed, 0 attempts failed")
    assert groups[-1].findall(f"{SVG}rect") == []  # no sample, no bar
    tallest = max(float(r.get("height")) for r in root.iter(f"{SVG}rect"))
    assert tallest == board_history.HEIGHT * 2 / 3  # max total of a minute is 3 (2 + 1): 2 of it completed


def test_a_hostile_queue_name_is_escaped_in_the_chart():
    name = '</svg><script>alert("x")</script>&'
    root = _chart(name, [(T0, 1, 1)])
    assert root.get("data-queue") == name  # parsed back to the original: it was escaped
    assert root.find(f"{SVG}title").text.startswith(name + ":")
    assert "<script>" not in str(board_history.chart(name, [(T0, 1, 1)]))


def test_the_panel_home_shows_the_history_and_no_cron_box_and_writes_nothing(settings, queue_redis, db):
    settings.OPTIMA_ENV = "dev"
    now = time.time()
    counters(queue_redis, "default", 3, 1)
    history.sample(queue_redis, now - 60)
    counters(queue_redis, "default", 9, 2)
    history.sample(queue_redis, now)
    before = {k: queue_redis.dump(k) for k in queue_redis.scan_iter(match=f"{settings.QUEUE_PREFIX}*")}
    response = Client().get("/admin/queues/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Cron Schedulers" not in html
    rows = {row["name"]: row for row in response.context["history"]}
    assert (rows["default"]["completed"], rows["default"]["failed"]) == (5, 1)
    assert rows["content"]["sampled"] is True and rows["content"]["completed"] == 0
    assert html.count('class="queue-history"') == 4
    after = {k: queue_redis.dump(k) for k in queue_redis.scan_iter(match=f"{settings.QUEUE_PREFIX}*")}
    assert after == before


@pytest.mark.parametrize(
    "progress, expected",
    [
        ({"step": 3, "of": 10, "note": "x"}, '<progress class="job-progress" value="3" max="10">'),
        ({"percent": 40, "step": 4, "steps": 10}, '<progress class="job-progress" value="4" max="10">'),
        ({"percent": 40}, '<progress class="job-progress" value="40" max="100">'),
        ({"step": "3", "of": "10"}, '<code class="job-progress-raw">'),
        ("<b>half</b>", '<code class="job-progress-raw">&lt;b&gt;half&lt;/b&gt;</code>'),
        ([1, 2], '<code class="job-progress-raw">[1, 2]</code>'),
    ],
)
def test_progress_is_a_bar_for_numbers_and_escaped_text_otherwise(progress, expected):
    html = render_to_string("queues/_progress.html", {"progress": progress})
    assert expected in html
    assert ("<progress" in html) == expected.startswith("<progress")
    assert "<b>" not in html


def test_a_worker_takes_the_minutes_sample_on_its_heartbeat(start_worker, queue_redis):
    counters(queue_redis, "orders-sync", 7, 2)
    # The minute's lock expires at the start of the next minute (SET NX EXAT): a worker that took its sample in a
    # minute's last seconds leaves no lock by the time it is read. So the worker starts early in a minute.
    left = 60 - time.time() % 60
    if left < 20:
        threading.Event().wait(left + 0.5)
    start_worker("default", "--burst").wait(60)
    samples = history.read(queue_redis)
    # One per minute however many heartbeats (two only if the worker's life crossed a minute).
    assert len(samples) >= 1
    assert len({int(t // 60) for t, _ in samples}) == len(samples)
    assert samples[0][1]["orders-sync"] == (7, 2)  # every declared queue, not only the worker's
    held = queue_redis.exists(keys.history_lock_key()) == 1
    latest = max(t for t, _ in samples)
    latest_minute_ended = time.time() >= (int(latest // 60) + 1) * 60  # only past a worker slower than 40 s
    assert held or latest_minute_ended


def test_no_sample_is_taken_while_the_minutes_lock_is_held(start_worker, queue_redis):
    queue_redis.set(keys.history_lock_key(), "another worker", ex=60)
    start_worker("default", "--burst").wait(60)
    assert queue_redis.llen(keys.history_key()) == 0


# --- 72 hours: ten-minute samples -----------------------------------------------------------------


def test_the_first_minute_sample_of_each_ten_minutes_also_goes_to_the_72_hour_list(queue_redis):
    base = T0 - T0 % history.COARSE + history.COARSE  # a ten-minute boundary
    for minute in range(25):  # minutes 0..24: windows starting at 0, 10 and 20
        counters(queue_redis, "default", 10 * minute, minute)
        history.sample(queue_redis, base + 60 * minute + 1)
    minutes, coarse = history.read_both(queue_redis)
    assert len(minutes) == 25
    assert [t for t, _ in coarse] == [base + 1, base + 601, base + 1201]
    assert coarse[-1][1]["default"] == (200, 20)
    series = history.per_ten_minutes(coarse, now=base + 1500)["default"]
    assert len(series) == 432
    # completed = processed - failed: (100 - 10) - 0 = 90, then (200 - 20) - (100 - 10) = 90
    assert series[-3:] == [(base, None, None), (base + 600, 90, 10), (base + 1200, 90, 10)]


def test_both_history_lists_are_trimmed_and_expire(queue_redis):
    base = T0 - T0 % history.COARSE + history.COARSE
    entry = json.dumps({"t": base, "q": {"default": [1, 0]}})
    queue_redis.lpush(keys.history_coarse_key(), *[entry] * (history.COARSE_SAMPLES + 50))
    queue_redis.lpush(keys.history_key(), *[entry] * (history.SAMPLES + 50))
    history.sample(queue_redis, base + history.COARSE + 1)
    assert queue_redis.llen(keys.history_key()) == history.SAMPLES == 61
    assert queue_redis.llen(keys.history_coarse_key()) == history.COARSE_SAMPLES == 433
    assert 0 < queue_redis.ttl(keys.history_key()) <= history.SAMPLES_TTL
    assert 72 * 3600 < queue_redis.ttl(keys.history_coarse_key()) <= history.COARSE_TTL


def test_the_72_hour_list_of_ten_queues_stays_under_its_documented_bound(queue_redis):
    # docs/metrics.md ("History"): 72 h of ten queues with 9-digit counters in at most 250 KB.
    names = [f"queue-name-{i:02d}" for i in range(10)]
    for i in range(history.COARSE_SAMPLES):
        entry = json.dumps(
            {"t": round(T0 + 600 * i + 0.123, 3), "q": {n: [999_999_999, 99_999_999] for n in names}},
            separators=(",", ":"),
        )
        queue_redis.lpush(keys.history_coarse_key(), entry)
    used = queue_redis.memory_usage(keys.history_coarse_key(), samples=0)
    assert used < 250_000, used


def test_the_72_hour_chart_has_one_group_per_ten_minutes_and_says_what_it_counts():
    periods = [(T0 + 600 * i, 2, 1) for i in range(431)] + [(T0 + 600 * 431, None, None)]
    root = ET.fromstring(str(board_history.chart("default", periods, coarse=True)))
    groups = root.findall(f"{SVG}g")
    assert len(groups) == 432
    assert root.get("class") == "queue-history queue-history-72h"
    assert root.get("width") == str(2 * 432)
    assert groups[0].get("data-period") == str(T0)
    assert groups[0].find(f"{SVG}title").text.endswith("UTC: 2 completed, 1 attempts failed")
    assert root.find(f"{SVG}title").text == (
        "default: 862 completed, 431 attempts failed in the last 72 hours, per 10 minutes"
    )


def test_the_panel_draws_both_resolutions_from_seeded_samples_with_a_legend(settings, queue_redis, db):
    now = time.time()

    def seed(key, *samples):
        for at, processed, failed in samples:
            queue_redis.lpush(key, json.dumps({"t": at, "q": {"default": [processed, failed]}}))

    seed(keys.history_coarse_key(), (now - 3 * 3600, 3, 1), (now - 2 * 3600, 40, 6))
    seed(keys.history_key(), (now - 120, 40, 6), (now, 50, 7))
    response = Client().get("/admin/queues/")
    html = response.content.decode()
    rows = {row["name"]: row for row in response.context["history"]}
    assert (rows["default"]["completed"], rows["default"]["failed"]) == (9, 1)
    assert (rows["default"]["completed_72h"], rows["default"]["failed_72h"]) == (32, 5)
    assert rows["default"]["sampled_72h"] is True and rows["content"]["sampled_72h"] is False
    assert html.count('class="queue-history queue-history-72h"') == 1
    assert 'data-completed="32" data-failed="5"' in str(rows["default"]["svg_72h"])
    assert "<strong>attempts failed</strong>" in html and "Attempts failed (72 h)" in html
    assert ">Dead jobs</th>" in html


# --- issue 32: the history cannot be frozen (finding 5) ---------------------------------------------


@pytest.mark.parametrize("future", [1e300, 24 * 3600, 3600, 61], ids=["1e300", "a day ahead", "an hour", "61 s"])
def test_a_72_hour_head_from_the_future_is_set_aside_and_sampling_goes_on(queue_redis, caplog, future):
    base = T0 - T0 % history.COARSE + history.COARSE
    t = future if future == 1e300 else base + 1 + future
    planted = json.dumps({"t": t, "q": {"default": [0, 0]}})
    queue_redis.lpush(keys.history_coarse_key(), planted)
    for minute in range(0, 25):
        counters(queue_redis, "default", 10 * minute, minute)
        queue_redis.delete(keys.history_lock_key())
        assert history.sample_if_due(queue_redis, at=base + 60 * minute + 1) is True

    minutes, coarse = history.read_both(queue_redis)
    assert [t for t, _ in coarse] == [base + 1, base + 601, base + 1201]
    assert len(minutes) == 25
    aside = queue_redis.keys(f"{keys.history_coarse_key()}.corrupt-*")
    assert len(aside) == 1 and queue_redis.lrange(aside[0], 0, -1) == [planted.encode()]
    assert "is a sample from the future" in caplog.text
    assert "could not sample" not in caplog.text


def test_a_72_hour_head_less_than_a_minute_ahead_is_clock_skew_and_kept(queue_redis):
    base = T0 - T0 % history.COARSE + history.COARSE
    history.sample(queue_redis, base + 30)  # another worker's clock, 29 s ahead
    history.sample(queue_redis, base + 1)
    _, coarse = history.read_both(queue_redis)
    assert [t for t, _ in coarse] == [base + 30]
    assert queue_redis.keys(f"{keys.history_coarse_key()}.corrupt-*") == []


@pytest.mark.parametrize("key", [keys.history_key, keys.history_coarse_key], ids=["minute list", "72-hour list"])
def test_a_history_list_set_to_a_string_is_set_aside_and_sampling_goes_on(queue_redis, caplog, key):
    base = T0 - T0 % history.COARSE + history.COARSE
    queue_redis.set(key(), "frozen")
    counters(queue_redis, "default", 3, 1)
    assert history.sample_if_due(queue_redis, at=base + 1) is True
    queue_redis.delete(keys.history_lock_key())
    assert history.sample_if_due(queue_redis, at=base + 61) is True

    minutes, coarse = history.read_both(queue_redis)
    assert [t for t, _ in minutes] == [base + 1, base + 61]
    assert [t for t, _ in coarse] == [base + 1]
    assert [queue_redis.get(k) for k in queue_redis.keys(f"{key()}.corrupt-*")] == [b"frozen"]
    assert "could not sample" not in caplog.text  # the WARNING it gave every minute


def test_a_queues_counters_of_the_wrong_type_leave_only_that_queue_out_of_the_sample(queue_redis):
    queue_redis.set(store.counters_key("default"), "nope")
    counters(queue_redis, "content", 2, 0)
    assert history.sample_if_due(queue_redis, at=T0 + 1) is True
    (sample,) = history.read(queue_redis)
    assert "default" not in sample[1] and sample[1]["content"] == (2, 0)
