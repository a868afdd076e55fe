"""StopState in-process: the stop request, the grace period and the cold stop (queues/worker/stop.py)."""

from queues.worker.stop import StopState


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_stop_asked_while_a_job_runs_gives_it_the_grace_period_from_that_moment():
    clock = Clock()
    stop = StopState(25, clock=clock)
    stop.request(running=True)
    clock.now += 24.9
    assert stop.grace_over() is False
    clock.now += 0.2
    assert stop.grace_over() is True


def test_a_stop_asked_while_a_job_was_starting_starts_the_grace_when_first_checked():
    clock = Clock()
    stop = StopState(10, clock=clock)
    stop.request(running=False)
    clock.now += 50
    assert stop.grace_over() is False  # the grace starts now
    clock.now += 10
    assert stop.grace_over() is True


def test_without_a_stop_request_the_grace_never_runs_out():
    clock = Clock()
    stop = StopState(0, clock=clock)
    clock.now += 1000
    assert stop.grace_over() is False
    assert stop.settle_deadline() is None


def test_a_second_signal_within_a_second_is_the_same_stop_delivered_twice():
    clock = Clock()
    stop = StopState(25, clock=clock)
    stop.request(running=True)
    clock.now += 0.5
    assert stop.repeated() is True
    clock.now += 0.6
    assert stop.repeated() is False


def test_a_cold_stop_interrupts_the_job_once_and_shortens_the_settling_wait():
    stop = StopState(25)
    stop.request(running=True)
    assert stop.settle_deadline() == 25.0
    stop.request_cold("second signal")
    stop.interrupt("grace over")  # the first reason stays
    assert stop.settle_deadline() == 5.0
    assert stop.take_interrupted() == "second signal"
    assert stop.take_interrupted() is None
