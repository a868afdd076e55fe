"""queues/worker/watchdog.py: one thread times every armed attempt of a concurrent or async worker."""

import threading
import time

import pytest

from queues.worker.watchdog import Watchdog


@pytest.fixture
def watchdog():
    fired = []
    done = threading.Event()

    def on_timeout(penalty):
        fired.append(penalty.job_id)
        done.set()

    dog = Watchdog(on_wedged=lambda penalty: None, who="test", on_timeout=on_timeout)
    dog.fired, dog.done = fired, done
    dog.start()
    yield dog
    dog.halt()
    dog.join(5)


def _waiting(dog):
    """Until the watchdog is waiting for its next look (it has looked once and holds no lock)."""
    for _ in range(1000):
        with dog.lock:
            if dog.passes and dog.next_wake != float("-inf"):
                return
        threading.Event().wait(0.005)
    raise AssertionError("the watchdog never waited")


def test_attempts_armed_with_later_deadlines_than_its_next_look_wake_no_one(watchdog):
    """At --async 500 a thousand attempts a second are armed and disarmed: each used to wake the watchdog, which went
    over every armed attempt under the lock the job threads arm with."""
    _waiting(watchdog)
    looked = watchdog.passes
    penalties = [watchdog.penalty_class(3600, job_id=f"long-{n}") for n in range(100)]
    pause, started = threading.Event(), time.monotonic()
    for penalty in penalties:
        penalty.setup_death_penalty()
        pause.wait(0.002)  # the GIL to the watchdog's thread, were it woken
    took, ticks = watchdog.passes - looked, int((time.monotonic() - started) / 0.5)
    for penalty in penalties:
        penalty.cancel_death_penalty()
    assert took <= 2 + ticks, (took, ticks)  # its own twice-a-second looks meanwhile, not one an arm (100 before)
    assert not watchdog.armed and not watchdog.fired


def test_an_attempt_due_before_its_next_look_wakes_it_and_times_out(watchdog):
    _waiting(watchdog)
    watchdog.penalty_class(3600, job_id="long").setup_death_penalty()
    _waiting(watchdog)
    looked = watchdog.passes
    short = watchdog.penalty_class(0.05, job_id="short")
    short.setup_death_penalty()
    assert watchdog.done.wait(10)
    assert watchdog.fired == ["short"] and watchdog.passes > looked
    short.cancel_death_penalty()


def test_an_attempt_disarmed_in_time_is_not_timed_out(watchdog):
    _waiting(watchdog)
    penalty = watchdog.penalty_class(0.3, job_id="quick")
    penalty.setup_death_penalty()
    penalty.cancel_death_penalty()
    late = watchdog.penalty_class(0.6, job_id="late")
    late.setup_death_penalty()
    assert watchdog.done.wait(10)
    assert watchdog.fired == ["late"]
