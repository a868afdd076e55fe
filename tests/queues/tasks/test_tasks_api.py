"""Django's Tasks API on the queues, producer side (queues/tasks/): validation, enqueue, the TaskResult
of a job that has not run, the backend's checks. No worker here: tests/queues/tasks/test_tasks.py runs them."""

import datetime as dt
import logging

import pytest
from django.core.checks import run_checks
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from django_tasks import TaskResultStatus, default_task_backend, task_backends
from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
from django_tasks.signals import task_enqueued

import queues
from queues.catalog import jobs as catalog
from queues.catalog.lookup import OptimaJob, get_queue
from queues.exceptions import InvalidJob
from queues.jobs import gate
from queues.tasks import results
from tests.jobs import tasks
from tests.support import tasks_elsewhere

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_backend_is_the_queues_one_with_every_feature():
    backend = task_backends["default"]
    assert type(backend).__module__ == "queues.tasks.backend"
    assert (
        backend.supports_defer,
        backend.supports_async_task,
        backend.supports_get_result,
        backend.supports_priority,
    ) == (True, True, True, True)


def test_a_task_in_a_job_module_is_a_declared_job_under_its_functions_path():
    assert catalog.is_declared("tests.jobs.tasks.add")
    assert catalog.task_of("tests.jobs.tasks.add") is tasks.add
    assert catalog.get("tests.jobs.tasks.add") is tasks.add.func  # what the worker runs: the function itself


def test_enqueue_writes_a_job_naming_the_function_as_queues_enqueue_would(queue_redis):
    result = tasks.add.enqueue(2, 3)
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs, result.backend, result.errors, result.worker_ids) == (
        [2, 3],
        {},
        "default",
        [],
        [],
    )
    job = OptimaJob.fetch(result.id, connection=queue_redis)
    plain = queues.enqueue_call("default", tasks.add.func, [2, 3])
    assert job.func_name == plain.func_name == "tests.jobs.tasks.add"
    assert job.meta["task"] == {"backend": "default"}
    assert result.id in get_queue("default").job_ids


def test_get_result_of_a_queued_task_is_ready_with_its_arguments():
    enqueued = tasks.add.enqueue(2, b=3)
    result = tasks.add.get_result(enqueued.id)
    assert (result.status, result.args, result.kwargs, result.attempts) == (TaskResultStatus.READY, [2], {"b": 3}, 0)
    assert result.enqueued_at is not None and result.started_at is None and result.finished_at is None
    assert result.task == tasks.add
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value  # the property raises


def test_task_enqueued_is_sent_with_the_result():
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender.__name__, task_result.id))

    task_enqueued.connect(receiver)
    try:
        result = tasks.add.enqueue(1, 1)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [("QueuesBackend", result.id)]


def test_an_unknown_queue_name_fails_validation_naming_the_queues():
    with pytest.raises(InvalidTaskError) as caught:
        tasks.add.using(queue_name="nowhere")
    assert str(caught.value) == (
        "queue_name='nowhere' of task tests.jobs.tasks.add is not a declared queue: pass one of 'content', "
        "'default', 'orders-sync', 'repricer', or declare the queue in an app's queues.py."
    )


def test_a_task_outside_a_job_module_is_built_but_refused_at_enqueue_and_by_the_gate(queue_redis):
    path = "tests.support.tasks_elsewhere.not_in_a_job_module"
    assert not catalog.is_declared(path)
    with pytest.raises(InvalidJob) as caught:
        tasks_elsewhere.not_in_a_job_module.enqueue(1)
    assert isinstance(caught.value, InvalidTaskError)
    assert "is a @task of the queues' Tasks backend but 'tests.support.tasks_elsewhere' is not a job module" in str(
        caught.value
    )
    assert "QUEUE_JOB_MODULES" in str(caught.value)
    job = OptimaJob.create(
        path,
        args=[1],
        connection=queue_redis,
        origin="default",
        meta={"queue": "default", "task": {"backend": "default"}},
    )
    refusal = gate.vet(job, "default")
    assert refusal.reason == gate.NOT_A_JOB


def test_queue_options_go_to_the_job_and_unknown_ones_are_refused(queue_redis):
    result = tasks.add.using(timeout=7, attempts=2, meta={"owner": "7"}).enqueue(1, 2)
    job = OptimaJob.fetch(result.id, connection=queue_redis)
    assert (job.timeout, job.meta["attempts_allowed"], job.meta["owner"]) == (7, 2, "7")
    with pytest.raises(InvalidTaskError, match="unknown option 'timout'. Did you mean 'timeout'"):
        tasks.add.using(timout=3)
    with pytest.raises(InvalidJob, match="timeout"):
        tasks.add.using(timeout=-1).enqueue(1, 2)


def test_run_after_defers_the_job_and_it_is_ready(queue_redis):
    when = timezone.now() + dt.timedelta(hours=1)
    result = tasks.add.using(run_after=when).enqueue(1, 2)
    assert queues.job_state(result.id).state == "scheduled"
    again = tasks.add.get_result(result.id)
    assert again.status == TaskResultStatus.READY
    assert again.task.run_after == when
    with pytest.raises(InvalidTaskError, match="aware"):
        tasks.add.using(run_after=dt.datetime(2030, 1, 1))


def test_inside_a_transaction_the_task_waits_in_the_outbox_and_reads_ready():
    with transaction.atomic():
        result = tasks.add.enqueue(4, 5)
        staged = tasks.add.get_result(result.id)
        assert queues.job_state(result.id).state == "outbox"
        assert (staged.status, staged.args) == (TaskResultStatus.READY, [4, 5])
        transaction.set_rollback(True)
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_an_unknown_id_and_a_job_that_is_no_task_do_not_exist_for_the_backend():
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("no-such-job")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("bad:id")
    plain = queues.enqueue("default", tasks.add.func, 1, 2)  # the same function, enqueued as a job
    with pytest.raises(TaskResultDoesNotExist, match="is not a task of the Tasks backend 'default'"):
        default_task_backend.get_result(plain.id)


def test_a_job_planted_with_a_task_marker_but_an_undeclared_function_is_refused(queue_redis):
    job = OptimaJob.create(
        "os.system",
        args=["true"],
        connection=queue_redis,
        origin="default",
        meta={"queue": "default", "task": {"backend": "default"}},
    )
    job.save()
    with pytest.raises(TaskResultDoesNotExist, match="'os.system'"):
        default_task_backend.get_result(job.id)


@pytest.mark.parametrize(
    "exc_string, path",
    [
        (
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    raise ValueError('a: b')\n"
            "ValueError: a: b\nsecond line of the message\n",
            "builtins.ValueError",
        ),
        (
            'Traceback (most recent call last):\n  File "x.py", line 1\nqueues.exceptions.PermanentError: no\n',
            "queues.exceptions.PermanentError",
        ),
        (
            'Traceback (most recent call last):\n  File "a"\nKeyError\n\n'
            "The above exception was the direct cause of the following exception:\n\n"
            'Traceback (most recent call last):\n  File "b"\nrq.timeouts.JobTimeoutException: Task exceeded',
            "rq.timeouts.JobTimeoutException",
        ),
        ("Refused, not run: job x names ...", "queues.exceptions.QueuesError"),
        ("", "queues.exceptions.QueuesError"),
    ],
)
def test_the_exception_class_path_is_read_from_the_traceback(exc_string, path):
    assert results.exception_path(exc_string) == path


def test_every_job_state_maps_to_a_task_status():
    assert {
        state: results.STATUS[state].value
        for state in (
            "outbox",
            "queued",
            "held",
            "deferred",
            "scheduled",
            "started",
            "finished",
            "failed",
            "stopped",
            "canceled",
        )
    } == {
        "outbox": "READY",
        "queued": "READY",
        "held": "READY",
        "deferred": "READY",
        "scheduled": "READY",
        "started": "RUNNING",
        "finished": "SUCCESSFUL",
        "failed": "FAILED",
        "stopped": "FAILED",
        "canceled": "FAILED",
    }


def test_the_backports_log_lines_are_skipped_for_this_backends_tasks_only(caplog):
    from django_tasks.backends.immediate import ImmediateBackend
    from django_tasks.signals import task_started

    caplog.set_level(logging.INFO, logger="django_tasks")
    result = tasks.add.enqueue(1, 2)
    task_started.send(type(task_backends["default"]), task_result=result)
    assert [r.getMessage() for r in caplog.records if r.name == "django_tasks"] == []
    task_started.send(ImmediateBackend, task_result=result)
    assert [r.getMessage() for r in caplog.records if r.name == "django_tasks"] == [
        f"Task id={result.id} path=tests.jobs.tasks.add state=READY"
    ]


def test_checks_report_undeclared_queues_and_unknown_options_with_the_apps_ids():
    assert [m for m in run_checks() if m.id.startswith("queues.E08")] == []
    with override_settings(
        TASKS={
            "default": {
                "BACKEND": "queues.tasks.QueuesBackend",
                "QUEUES": ["default", "nope"],
                "OPTIONS": {"retries": 3},
            }
        }
    ):
        found = {m.id: m.msg for m in run_checks() if m.id.startswith("queues.")}
        assert found == {
            "queues.E080": "TASKS['default']['QUEUES'] names 'nope', not declared queue(s) (declared: 'content', "
            "'default', 'orders-sync', 'repricer').",
            "queues.E081": "TASKS['default']['OPTIONS'] has 'retries', which the queues' backend does not read.",
        }
        with pytest.raises(
            InvalidTaskError, match="is not one of TASKS\\['default'\\]\\['QUEUES'\\]: pass one of 'default'"
        ):
            tasks.add.using(queue_name="content")
    assert type(task_backends["default"]).__name__ == "QueuesBackend"


def test_a_queues_backend_without_django_tasks_installed_is_warned_about_its_checks_never_running(settings):
    assert [m for m in run_checks() if m.id == "queues.W082"] == []
    settings.INSTALLED_APPS = [app for app in settings.INSTALLED_APPS if app != "django_tasks"]
    [warning] = [m for m in run_checks() if m.id == "queues.W082"]
    assert warning.msg == (
        "TASKS['default'] uses queues.tasks.QueuesBackend but 'django_tasks' is not in "
        "INSTALLED_APPS: the Tasks backend's checks (queues.E080, E081, E083-E086) never run."
    )
    assert "Add 'django_tasks' to INSTALLED_APPS" in warning.hint


def test_an_attempt_that_went_back_to_the_queue_without_counting_adds_no_worker(queue_redis):
    """The worker records its name as an attempt starts; an attempt given back (worker stopped, Redis away)
    does not advance ``meta["attempt"]``, so the entry it left is not counted, and the next start replaces it."""
    enqueued = tasks.add.enqueue(1, 2)
    job = OptimaJob.fetch(enqueued.id, connection=queue_redis)
    job.meta["worker_ids"] = ["stopped-worker"]  # what the interrupted first attempt left
    job.save_meta()
    assert tasks.add.get_result(enqueued.id).worker_ids == []
    job.meta.update(attempt=2, worker_ids=["w1", "w2-stopped"])  # attempt 1 failed; attempt 2 went back
    job.save_meta()
    assert tasks.add.get_result(enqueued.id).worker_ids == ["w1"]
