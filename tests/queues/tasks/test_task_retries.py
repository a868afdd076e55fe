"""A Task's retries in the shape proposed for Django (issue 35 §4; queues/tasks/retries.py): ``MAX_ATTEMPTS`` and
``BACKOFF`` in ``TASKS[alias]["OPTIONS"]`` and ``using(max_attempts=..., backoff=...)``, honoured by real workers
(a burst OptimaWorker in this process, forking its work horses); their checks and the errors of ``using()``."""

import json
import logging

import pytest
from django.core.checks import run_checks
from django.test import override_settings
from django_tasks import TaskResultStatus, default_task_backend
from django_tasks.exceptions import InvalidTaskError

from queues.catalog.lookup import OptimaJob
from queues.exceptions import InvalidJob
from queues.failures import operations, retry
from queues.models import DeadLetter
from queues.tasks import retries
from tests.jobs import tasks
from tests.queues.tasks import backoffs
from tests.support.lifecycle import release_now, wait_scheduled_for_attempt
from tests.support.worker import run_burst

pytestmark = pytest.mark.django_db(transaction=True)

BACKEND = "queues.tasks.QueuesBackend"
RECORDED = "tests.queues.tasks.backoffs.recorded"


def backend_options(**options):
    return {"default": {"BACKEND": BACKEND, "OPTIONS": options}}


def fetch(job_id, connection):
    return OptimaJob.fetch(job_id, connection=connection)


@pytest.mark.slow
def test_a_task_is_retried_by_its_backoff_until_it_succeeds_and_a_broken_backoff_falls_back_to_the_queues(
    queue_redis, settings, tmp_path, monkeypatch
):
    monkeypatch.setattr(backoffs, "SEEN", str(tmp_path / "seen.jsonl"))
    settings.TASKS = backend_options(BACKOFF=RECORDED)
    retried = tasks.attempt_number.enqueue(fail_until=3)
    fallback = tasks.attempt_number.using(backoff=backoffs.broken, max_attempts=2).enqueue(fail_until=9)
    marker = fetch(retried.id, queue_redis).meta["task"]
    assert (marker["backoff"], marker["backoff_mac"]) == (RECORDED, retries.seal(RECORDED))
    assert fetch(fallback.id, queue_redis).meta["task"]["backoff"] == "tests.queues.tasks.backoffs.broken"

    run_burst(queue_redis)
    wait_scheduled_for_attempt(queue_redis, "default", retried.id, 2)  # 0.5 s: it waits in the scheduled registry
    waiting = default_task_backend.get_result(retried.id)
    assert (waiting.status, waiting.attempts, len(waiting.errors)) == (TaskResultStatus.READY, 1, 1)
    # The broken backoff raised: logged, and the queue's own backoff (1 s on "default") scheduled the retry.
    assert wait_scheduled_for_attempt(queue_redis, "default", fallback.id, 2).meta["last_retry_reason"] == "backoff"

    release_now(queue_redis, "default", retried.id)
    release_now(queue_redis, "default", fallback.id)
    run_burst(queue_redis)  # attempt 2 fails, the backoff answers 0: attempt 3 runs in the same burst
    result = default_task_backend.get_result(retried.id)
    assert (result.status, result.attempts, result.return_value["attempt"]) == (TaskResultStatus.SUCCESSFUL, 3, 3)
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError", "builtins.ValueError"]
    assert [e.traceback.strip().splitlines()[-1] for e in result.errors] == [
        "ValueError: attempt 1 fails",
        "ValueError: attempt 2 fails",
    ]
    with open(backoffs.SEEN) as f:
        seen = [json.loads(line) for line in f]
    assert seen == [
        {
            "exception": "ValueError: attempt 1 fails",
            "status": "FAILED",
            "attempts": 1,
            "errors": ["builtins.ValueError"],
            "last_traceback_says": "ValueError: attempt 1 fails",
            "id": retried.id,
        },
        {
            "exception": "ValueError: attempt 2 fails",
            "status": "FAILED",
            "attempts": 2,
            "errors": ["builtins.ValueError", "builtins.ValueError"],
            "last_traceback_says": "ValueError: attempt 2 fails",
            "id": retried.id,
        },
    ]
    dead = default_task_backend.get_result(fallback.id)
    assert (dead.status, dead.attempts, len(dead.errors)) == (TaskResultStatus.FAILED, 2, 2)


@pytest.mark.slow
def test_a_backoff_that_answers_none_dead_letters_the_task_and_using_beats_the_options_max_attempts(
    queue_redis, settings
):
    settings.TASKS = backend_options(MAX_ATTEMPTS=2, BACKOFF="tests.queues.tasks.backoffs.at_once")
    gives_up = tasks.attempt_number.using(backoff=backoffs.none_after_two, max_attempts=5).enqueue(fail_until=99)
    by_options = tasks.attempt_number.enqueue(fail_until=99)
    by_using = tasks.attempt_number.using(max_attempts=3).enqueue(fail_until=99)
    ids = (gives_up.id, by_options.id, by_using.id)
    assert [fetch(i, queue_redis).meta["attempts_allowed"] for i in ids] == [5, 2, 3]

    run_burst(queue_redis)  # every backoff answers 0 or None: each retry runs in the same burst
    found = [default_task_backend.get_result(i) for i in ids]
    assert [(r.status, r.attempts, len(r.errors)) for r in found] == [
        (TaskResultStatus.FAILED, 2, 2),  # its backoff said None after the 2nd failure, 3 attempts unused
        (TaskResultStatus.FAILED, 2, 2),  # MAX_ATTEMPTS of the OPTIONS
        (TaskResultStatus.FAILED, 3, 3),  # using(max_attempts=3) over the OPTIONS
    ]
    assert found[0].task.max_attempts == 5 and found[0].task.backoff == "tests.queues.tasks.backoffs.none_after_two"
    rows = {row.job_id: (row.reason, row.attempts_made) for row in DeadLetter.objects.filter(job_id__in=ids)}
    assert rows == {gives_up.id: ("exhausted", 2), by_options.id: ("exhausted", 2), by_using.id: ("exhausted", 3)}
    # An operator's retry of the dead letter starts a new life: its errors are of that life only.
    operations.retry_dead_letter(DeadLetter.objects.get(job_id=by_using.id).pk)
    again = default_task_backend.get_result(by_using.id)
    assert (again.status, again.attempts, again.errors) == (TaskResultStatus.READY, 0, [])
    run_burst(queue_redis)
    second_life = default_task_backend.get_result(by_using.id)
    assert (second_life.status, second_life.attempts, len(second_life.errors)) == (TaskResultStatus.FAILED, 3, 3)


def test_a_backoff_path_planted_in_redis_is_never_imported_and_a_failing_backoff_is_logged(
    queue_redis, settings, caplog
):
    settings.TASKS = backend_options(BACKOFF="tests.queues.tasks.backoffs.at_once")
    enqueued = tasks.attempt_number.enqueue(fail_until=3)
    job = fetch(enqueued.id, queue_redis)
    sealed = retry.policy_for(job)
    assert retry.decide(1, sealed, ValueError("boom")) == retry.Decision(True, delay=0.0)  # at_once's answer
    caplog.set_level(logging.ERROR, logger="queues.retry")
    job.meta["task"]["backoff"] = "os.system"  # written to Redis by someone else: the seal is of another path
    planted = retry.decide(1, retry.policy_for(job), ValueError("boom"), rand=lambda: 0.0)
    assert planted == retry.Decision(True, delay=1.0)  # the queue's backoff: "os.system" was never called
    job.meta["task"].update(backoff="tests.queues.tasks.backoffs.broken", backoff_mac=retries.seal(backoffs.BROKEN))
    broken = retry.decide(1, retry.policy_for(job), ValueError("boom"), rand=lambda: 0.0)
    assert broken == retry.Decision(True, delay=1.0)
    assert [str(r.exc_info[1]) for r in caplog.records if r.name == "queues.retry"] == [
        f"job {enqueued.id}: its backoff 'os.system' is not sealed by this app: never imported",
        f"job {enqueued.id}: backoff {backoffs.BROKEN} raised RuntimeError: this backoff is broken",
    ]
    job.meta["task"].pop("backoff")
    assert retry.policy_for(job).own_backoff is None


def test_checks_and_using_name_a_bad_max_attempts_or_backoff_and_the_fix():
    assert [m for m in run_checks() if m.id.startswith("queues.E08")] == []
    with override_settings(TASKS=backend_options(MAX_ATTEMPTS=3, BACKOFF=RECORDED)):
        assert [m for m in run_checks() if m.id.startswith("queues.E08")] == []
    cases = {
        "queues.E081": (
            {"MAX_ATTEMPT": 3},
            "TASKS['default']['OPTIONS'] has 'MAX_ATTEMPT', which the queues' backend does not read.",
        ),
        "queues.E083": (
            {"MAX_ATTEMPTS": 0},
            "TASKS['default']['OPTIONS']['MAX_ATTEMPTS'] must be an integer >= 1, got 0.",
        ),
        "queues.E084": (
            {"BACKOFF": backoffs.at_once},
            f"TASKS['default']['OPTIONS']['BACKOFF'] must be a dotted path of a callable, got {backoffs.at_once!r}.",
        ),
        "queues.E085": (
            {"BACKOFF": "tests.queues.tasks.backoffs.nowhere"},
            "TASKS['default']['OPTIONS']['BACKOFF'] = "
            "'tests.queues.tasks.backoffs.nowhere' cannot be imported (Module "
            '"tests.queues.tasks.backoffs" does not define a "nowhere" attribute/class).',
        ),
        "queues.E086": (
            {"BACKOFF": "tests.queues.tasks.backoffs.one_argument"},
            "TASKS['default']['OPTIONS']"
            "['BACKOFF'] = 'tests.queues.tasks.backoffs.one_argument' is not a callable taking "
            f"(exception, task_result): got {backoffs.one_argument!r}.",
        ),
    }
    for check_id, (options, message) in cases.items():
        with override_settings(TASKS=backend_options(**options)):
            found = [(m.id, m.msg) for m in run_checks() if m.id.startswith("queues.E08")]
            assert found == [(check_id, message)]
    with override_settings(TASKS=backend_options(MAX_ATTEMPTS=0)):  # the first enqueue refuses it too
        with pytest.raises(InvalidTaskError, match=r"^TASKS\['default'\]\['OPTIONS'\]\['MAX_ATTEMPTS'\] must be"):
            tasks.add.enqueue(1, 2)
    with override_settings(TASKS=backend_options(MAX_ATTEMPT=3)):
        [e081] = [m for m in run_checks() if m.id == "queues.E081"]
        assert e081.hint.startswith("Did you mean 'MAX_ATTEMPTS'? OPTIONS takes MAX_ATTEMPTS, BACKOFF")

    with pytest.raises(InvalidJob) as caught:
        tasks.add.using(max_attempts=0)
    assert isinstance(caught.value, InvalidTaskError)
    assert str(caught.value) == (
        "tests.jobs.tasks.add.using(max_attempts=...) must be an integer >= 1, got 0. Give the number of runs in "
        "all, the first included (1: never retried)."
    )
    with pytest.raises(InvalidTaskError, match="max_attempts=3 and attempts=2 disagree"):
        tasks.add.using(max_attempts=3, attempts=2)
    with pytest.raises(InvalidTaskError, match="has no dotted path"):
        tasks.add.using(backoff=lambda exception, task_result: 1)
    with pytest.raises(InvalidTaskError, match="is not a callable taking \\(exception, task_result\\)"):
        tasks.add.using(backoff=backoffs.one_argument)
    with pytest.raises(InvalidTaskError, match="cannot be imported"):
        tasks.add.using(backoff="tests.queues.tasks.backoffs.nowhere")
    task = tasks.add.using(max_attempts=4, backoff="tests.queues.tasks.backoffs.at_once")
    assert (task.max_attempts, task.backoff) == (4, "tests.queues.tasks.backoffs.at_once")
    assert tasks.add.max_attempts is None and tasks.add.backoff is None  # using() made a new Task


@pytest.mark.slow
def test_errors_keep_one_entry_per_failed_attempt_past_rqs_ten_results_whether_the_task_succeeds_or_dies(
    queue_redis, settings
):
    """rq keeps about ten entries in a job's results stream (XADD MAXLEN ~ 10): a task with more attempts lost its
    first errors. queues/jobs/stream.py keeps one per attempt."""
    settings.TASKS = backend_options(BACKOFF="tests.queues.tasks.backoffs.at_once")
    succeeds = tasks.attempt_number.using(max_attempts=14).enqueue(fail_until=13)
    dies = tasks.attempt_number.using(max_attempts=12).enqueue(fail_until=99)

    run_burst(queue_redis)  # the backoff answers 0: every retry runs in the same burst
    result = default_task_backend.get_result(succeeds.id)
    assert (result.status, result.attempts, result.return_value["attempt"]) == (TaskResultStatus.SUCCESSFUL, 13, 13)
    assert [e.traceback.strip().splitlines()[-1] for e in result.errors] == [
        f"ValueError: attempt {n} fails" for n in range(1, 13)
    ]
    dead = default_task_backend.get_result(dies.id)
    assert (dead.status, dead.attempts) == (TaskResultStatus.FAILED, 12)
    assert [e.traceback.strip().splitlines()[-1] for e in dead.errors] == [
        f"ValueError: attempt {n} fails" for n in range(1, 13)
    ]
    assert queue_redis.xlen(f"{settings.QUEUE_PREFIX}:results:{dies.id}") == 12
