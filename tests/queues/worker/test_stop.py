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


# -- issue 32, finding 10: the first signal's handler takes no lock and sends no Redis command ------------


class Untouchable:
    """A Redis client or logger the signal handler must not use: any use is recorded."""

    def __init__(self, uses):
        self._uses = uses

    def __getattr__(self, name):
        self._uses.append(name)
        raise AssertionError(f"the signal handler used {name}")


class Recorder:
    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.calls.append((name, args))


def stopping_worker(uses, running):
    import types

    errands = []
    worker = types.SimpleNamespace(
        name="w1",
        key="rq:worker:w1",
        stop=StopState(3),
        log=Untouchable(uses),
        connection=Untouchable(uses),
        housekeeping=types.SimpleNamespace(schedulers=None),
        lifeline=types.SimpleNamespace(errand=errands.append),
        job_running=lambda: running,
        request_force_stop=lambda signum, frame: None,
        runs_jobs_in_process=True,  # no work horse to tell (a forking worker's: tests/queues/processes/test_resume.py)
    )
    return worker, errands


def test_the_first_signal_logs_nothing_and_writes_nothing_itself_its_lifeline_does_both():
    import signal

    from queues.worker.stop import first_signal

    uses = []
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker, errands = stopping_worker(uses, running=True)
        first_signal(worker, signal.SIGTERM)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert uses == []  # no log line (a handler's lock), no Redis command (a Redis away) in the handler
    assert worker.stop.requested is True
    assert worker._stop_requested is True  # rq's loop stops before its next dequeue
    assert len(errands) == 1
    worker.log, connection = Recorder(), Recorder()
    errands[0](connection)  # what the lifeline thread then does
    assert [name for name, _ in worker.log.calls] == ["warning"]
    assert "taking no new job" in worker.log.calls[0][1][0]
    assert [(name, args[:2]) for name, args in connection.calls] == [
        ("hset", ("rq:worker:w1", "shutdown_requested_date"))
    ]


def test_an_idle_worker_first_signal_is_logged_by_the_lifeline_too():
    import signal

    from queues.worker.stop import first_signal

    uses = []
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker, errands = stopping_worker(uses, running=False)
        first_signal(worker, signal.SIGINT)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert uses == []
    worker.log, connection = Recorder(), Recorder()
    errands[0](connection)
    assert worker.log.calls[0][1][1:] == ("w1", "SIGINT")
    assert connection.calls == []
