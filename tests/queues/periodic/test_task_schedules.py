"""A schedule whose ``func`` names a Django Task (``@task``): validated as one, run through a real worker with
its TaskContext, and its run read back with ``get_result`` as any enqueued Task."""

import datetime as dt

import pytest
from django_tasks import TaskResultStatus

from queues.periodic.declare import check_schedules, declared_schedules
from queues.periodic.plan import register
from queues.periodic.run import run_schedule
from queues.periodic.validation import function_path
from tests.jobs import tasks
from tests.support.worker import run_burst

UTC = dt.UTC


@pytest.mark.django_db(transaction=True)  # the in-process worker closes the database connection
def test_a_scheduled_task_runs_with_its_context_and_its_run_is_a_task_result(
    settings, queue_redis, django_capture_on_commit_callbacks
):
    settings.OPTIMA_SCHEDULES = [
        {
            "id": "task-attempt",
            "queue": "default",
            "func": "tests.jobs.tasks.attempt_number",
            "args": [1],
            "cron": "0 3 * * *",
        },
        {"id": "task-bad", "queue": "default", "func": "tests.jobs.tasks.missing_task", "interval": 60},
    ]
    assert [e.id for e in check_schedules()] == ["queues.E034"]
    settings.OPTIMA_SCHEDULES = settings.OPTIMA_SCHEDULES[:1]
    assert check_schedules() == []
    assert function_path("tests.jobs.tasks.attempt_number") == "tests.jobs.tasks.attempt_number"
    assert register(queue_redis).added == ["task-attempt"]

    schedule = declared_schedules()[0]
    with django_capture_on_commit_callbacks(execute=True):
        run = run_schedule(schedule, dt.datetime(2026, 1, 1, 3, 0, tzinfo=UTC))
    run_burst(queue_redis, "default")
    result = tasks.attempt_number.get_result(run.id)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 1, "id": run.id, "workers": 1}
    assert result.task.func is tasks.attempt_number.func
