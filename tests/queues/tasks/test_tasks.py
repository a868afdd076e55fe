"""Django's Tasks API on the queues, through real workers (a burst OptimaWorker in this process, forking
its work horses, as tests/queues/jobs/test_gate.py runs it): results, async tasks, context and retries, dead
letters, cancel, the framework's signals from the worker, and the three priority bands."""

import json

import pytest
from django_tasks import TaskResultStatus, default_task_backend
from django_tasks.signals import task_finished, task_started

import queues
from queues.models import DeadLetter
from tests.jobs import tasks
from tests.support.lifecycle import release_now, wait_scheduled_for_attempt
from tests.support.worker import run_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def signals_seen(tmp_path):
    """The framework's signals the work horses send, one JSON line each (receivers connected before the fork)."""
    path = tmp_path / "signals.jsonl"

    def recorder(name):
        def record(sender, task_result, **kwargs):
            with open(path, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "signal": name,
                            "sender": sender.__name__,
                            "id": task_result.id,
                            "status": task_result.status.value,
                            "attempts": task_result.attempts,
                        }
                    )
                    + "\n"
                )

        return record

    receivers = {task_started: recorder("task_started"), task_finished: recorder("task_finished")}
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    yield lambda: [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    for signal, receiver in receivers.items():
        signal.disconnect(receiver)


def test_a_task_runs_and_its_result_says_so(queue_redis, signals_seen):
    enqueued = tasks.add.enqueue(2, 3)
    later = tasks.add_later.enqueue(4, 5)
    worker = run_burst(queue_redis)
    result = tasks.add.get_result(enqueued.id)
    assert (result.status, result.return_value, result.worker_ids, result.attempts, result.errors) == (
        TaskResultStatus.SUCCESSFUL,
        5,
        [worker.name],
        1,
        [],
    )
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    async_result = tasks.add_later.get_result(later.id)
    assert (async_result.status, async_result.return_value) == (TaskResultStatus.SUCCESSFUL, 9)
    enqueued.refresh()
    assert (enqueued.status, enqueued.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert signals_seen() == [
        {"signal": "task_started", "sender": "QueuesBackend", "id": enqueued.id, "status": "RUNNING", "attempts": 1},
        {
            "signal": "task_finished",
            "sender": "QueuesBackend",
            "id": enqueued.id,
            "status": "SUCCESSFUL",
            "attempts": 1,
        },
        {"signal": "task_started", "sender": "QueuesBackend", "id": later.id, "status": "RUNNING", "attempts": 1},
        {"signal": "task_finished", "sender": "QueuesBackend", "id": later.id, "status": "SUCCESSFUL", "attempts": 1},
    ]


def test_a_worker_process_logs_a_task_like_a_job(start_worker):
    task_result = tasks.add.enqueue(2, 3)
    job = queues.enqueue("default", tasks.add.func, 2, 3)
    worker = start_worker("default", "--burst")
    assert worker.wait(60) == 0
    lines = worker.output().splitlines()
    about_task = [line for line in lines if task_result.id in line]
    about_job = [line for line in lines if job.id in line]
    assert len(about_task) == len(about_job) >= 1, lines
    assert [line for line in lines if "Task id=" in line] == []  # the backport's own lines are not added


def test_a_context_task_sees_its_attempt_and_the_result_keeps_each_failed_attempt(
    queue_redis, lifecycle_queue, signals_seen
):
    enqueued = tasks.attempt_number.using(queue_name=lifecycle_queue).enqueue(fail_until=2)
    first = run_burst(queue_redis, lifecycle_queue)
    wait_scheduled_for_attempt(queue_redis, lifecycle_queue, enqueued.id, 2)
    waiting = default_task_backend.get_result(enqueued.id)
    assert (waiting.status, waiting.worker_ids, len(waiting.errors)) == (TaskResultStatus.READY, [first.name], 1)
    assert waiting.errors[0].exception_class_path == "builtins.ValueError"
    assert waiting.errors[0].exception_class is ValueError
    assert "ValueError: attempt 1 fails" in waiting.errors[0].traceback
    release_now(queue_redis, lifecycle_queue, enqueued.id)
    second = run_burst(queue_redis, lifecycle_queue)
    result = default_task_backend.get_result(enqueued.id)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"attempt": 2, "id": enqueued.id, "workers": 2}
    assert (result.worker_ids, result.attempts, len(result.errors)) == ([first.name, second.name], 2, 1)
    assert result.task.queue_name == lifecycle_queue
    assert [(s["signal"], s["status"]) for s in signals_seen()] == [
        ("task_started", "RUNNING"),
        ("task_started", "RUNNING"),
        ("task_finished", "SUCCESSFUL"),
    ]


def test_a_permanent_error_dead_letters_the_task_and_it_reads_failed(queue_redis, signals_seen):
    enqueued = tasks.fail_permanently.enqueue("bad data")
    run_burst(queue_redis)
    result = tasks.fail_permanently.get_result(enqueued.id)
    assert (result.status, result.attempts, result.is_finished) == (TaskResultStatus.FAILED, 1, True)
    assert [e.exception_class_path for e in result.errors] == ["queues.exceptions.PermanentError"]
    assert result.finished_at is not None
    with pytest.raises(ValueError, match="failed"):
        _ = result.return_value  # the property raises
    row = DeadLetter.objects.get(job_id=enqueued.id)
    assert (row.reason, row.func_path) == ("permanent", "tests.jobs.tasks.fail_permanently")
    assert signals_seen()[-1] == {
        "signal": "task_finished",
        "sender": "QueuesBackend",
        "id": enqueued.id,
        "status": "FAILED",
        "attempts": 1,
    }


def test_a_canceled_task_never_runs_and_reads_failed(queue_redis, tmp_path):
    enqueued = tasks.record.enqueue(str(tmp_path / "ran"), "canceled")
    queues.cancel(enqueued.id)
    run_burst(queue_redis)
    assert not (tmp_path / "ran").exists()
    result = tasks.record.get_result(enqueued.id)
    assert (result.status, result.worker_ids) == (TaskResultStatus.FAILED, [])


def test_priority_bands_run_high_then_normal_then_low_each_in_enqueue_order(queue_redis, tmp_path):
    path = str(tmp_path / "order")
    levels = {"low": -10, "normal": 0, "high": 10}
    labels = []
    for i in range(3):
        for band in ("low", "normal", "high"):
            label = f"{band}-{i}"
            tasks.record.using(priority=levels[band]).enqueue(path, label)
            labels.append(label)
    run_burst(queue_redis)
    with open(path) as f:
        ran = f.read().split()
    assert ran == [f"{band}-{i}" for band in ("high", "normal", "low") for i in range(3)]
