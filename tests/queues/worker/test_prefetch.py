"""queues/worker/prefetch.py: the run-time average that decides whether a worker pops quick jobs ahead. (Jobs popped
ahead in real worker processes, and given back: test_concurrency.py, test_no_fork.py.)"""

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from queues.worker import prefetch
from queues.worker.prefetch import PREFETCH_BELOW_SECONDS, Prefetch

START = datetime(2026, 12, 7, tzinfo=UTC)


def ended(func_name, seconds):
    """What ``Prefetch.note`` reads of a job that ran ``seconds``."""
    return SimpleNamespace(func_name=func_name, started_at=START, ended_at=START + timedelta(seconds=seconds))


def test_the_first_run_of_each_function_is_not_counted_its_imports_are_in_it():
    seen = Prefetch()
    seen.note(ended("app.jobs.sync", 0.8))  # the module's imports
    assert seen.run_time is None and not seen.quick()
    seen.note(ended("app.jobs.sync", 0.002))
    assert seen.run_time == 0.002 and seen.quick()
    seen.note(ended("app.jobs.report", 5.0))  # another function's first run
    assert seen.run_time == 0.002
    seen.note(ended("app.jobs.report", 0.502))
    assert abs(seen.run_time - (0.002 + prefetch.RUN_TIME_WEIGHT * 0.5)) < 1e-9
    assert seen.run_time > PREFETCH_BELOW_SECONDS and not seen.quick()


def test_long_jobs_after_their_first_run_keep_the_worker_from_popping_ahead():
    seen = Prefetch()
    for _ in range(3):
        seen.note(ended("app.jobs.slow", 0.2))
    assert seen.run_time == 0.2 and not seen.quick()


def test_the_functions_remembered_are_bounded(monkeypatch):
    monkeypatch.setattr(prefetch, "FIRST_RUNS_KEPT", 3)
    seen = Prefetch()
    for name in "abc":
        seen.note(ended(name, 1.0))
    assert seen.ran == {"a", "b", "c"} and seen.run_time is None
    seen.note(ended("d", 1.0))  # the set forgot the others: their next run is a first one again
    assert seen.ran == {"d"} and seen.run_time is None


def test_a_job_without_its_times_is_not_counted():
    seen = Prefetch()
    seen.note(ended("f", 0.01))
    seen.note(SimpleNamespace(func_name="f", started_at=None, ended_at=START))
    assert seen.run_time is None
