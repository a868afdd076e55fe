"""The worker's hook interface (queues/events/hooks.py): what the app installs, and what a point calls.

The points are called by real workers in test_logs.py, test_metrics.py, test_tracing.py and test_retry.py
(the lifecycle signals); here, the registry itself.
"""

import logging

import pytest

from queues.events import hooks
from queues.events.signals import SignalsHook
from queues.logs.hook import LogsHook
from queues.metrics.hook import MetricsHook
from queues.tracing.hook import TracingHook
from queues.workflows.hook import BatchesHook


@pytest.fixture
def installed_again():
    before = hooks.installed()
    yield
    hooks.install(*before)


def test_the_app_installs_the_logs_metrics_signals_tracing_and_batches_hooks_in_that_order():
    assert [type(hook) for hook in hooks.installed()] == [LogsHook, MetricsHook, SignalsHook, TracingHook, BatchesHook]


class Seen(hooks.Hook):
    name = "seen"

    def __init__(self):
        self.calls = []

    def after_success(self, job, queue, duration, carried):
        self.calls.append(("after_success", job, queue, duration, carried))


class Broken(hooks.Hook):
    def after_success(self, job, queue, duration, carried):
        raise RuntimeError("a broken hook")


def test_a_point_calls_only_the_hooks_that_override_it_in_their_order(installed_again):
    seen = Seen()
    hooks.install(hooks.Hook(), seen)
    assert hooks._points["after_success"] == [seen.after_success]
    assert hooks._points["before_process"] == []
    hooks.after_success("job", "default", 0.5, True)
    hooks.before_process("job", "default")
    assert seen.calls == [("after_success", "job", "default", 0.5, True)]


def test_a_hook_that_raises_is_logged_and_the_next_one_still_runs(installed_again, caplog):
    seen = Seen()
    hooks.install(Broken(), seen)
    with caplog.at_level(logging.ERROR, logger="queues.events"):
        hooks.after_success("job", "default", 0.5, False)
    assert seen.calls == [("after_success", "job", "default", 0.5, False)]
    assert [record.getMessage().split(" failed")[0] for record in caplog.records] == [
        f"queues hook {hooks.installed()[0]!r}"
    ]


def test_no_hook_wraps_the_run_of_a_job_while_tracing_is_off():
    assert hooks.processing("job") is None


def test_what_a_horse_hands_over_goes_to_the_hook_of_that_name(installed_again):
    class Holder(hooks.Hook):
        name = "holder"

        def __init__(self):
            self.held = None

        def hand_over(self):
            return {"n": 1}

        def take_over(self, data):
            self.held = data

    holder = Holder()
    hooks.install(holder)
    handed = hooks.hand_over()
    assert handed == {"holder": {"n": 1}}
    hooks.take_over(handed)
    assert holder.held == {"n": 1}
