"""A project that configured no logging still sees the worker's and the scheduler's lines on the console, as rq's
own worker prints its own (queues/logs/console.py); with LOGGING configured, nothing changes (one line, its format)."""

import pytest

import queues
from tests.jobs import sample

NO_LOGGING = {"DJANGO_SETTINGS_MODULE": "tests.support.no_logging_settings"}


def lines_with(output, text):
    return [line for line in output.splitlines() if text in line]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_in_a_project_without_logging_prints_the_outcome_of_each_job(start_worker):
    ok = queues.enqueue("default", sample.add, 2, 3)
    worker = start_worker("default", "--burst", "--without-scheduler", env=NO_LOGGING)
    assert worker.wait(60) == 0, worker.output()
    out = worker.output()
    [line] = lines_with(out, ok.id)
    assert f" INFO queues.jobs: job {ok.id} succeeded: queue=default func=tests.jobs.sample.add attempt=1" in line


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_worker_of_a_project_with_logging_prints_each_outcome_once_in_the_projects_format(start_worker):
    ok = queues.enqueue("default", sample.add, 2, 3)
    worker = start_worker("default", "--burst", "--without-scheduler")
    assert worker.wait(60) == 0, worker.output()
    [line] = lines_with(worker.output(), ok.id)  # the project's root handler only: not twice
    assert f" INFO queues.jobs: job {ok.id} succeeded: " in line


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_quiet_worker_without_logging_prints_no_info_line(start_worker):
    ok = queues.enqueue("default", sample.add, 2, 3)
    worker = start_worker("default", "--burst", "--without-scheduler", "--verbosity", "0", env=NO_LOGGING)
    assert worker.wait(60) == 0, worker.output()
    assert lines_with(worker.output(), ok.id) == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_the_scheduler_in_a_project_without_logging_prints_its_lines(start_worker):
    scheduler = start_worker("--burst", env=NO_LOGGING, command="rqscheduler")
    assert scheduler.wait(60) == 0, scheduler.output()
    assert lines_with(scheduler.output(), " INFO queues.schedules: Periodic jobs registered: ") != []
