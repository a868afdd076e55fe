"""A long job's cursor and checkpoint (queues/jobs/resume.py, ``queues.current_job()``) without a worker process:
in ``queues.testing.inline()``, in a burst worker of this process, and the bad input refused with its fix.
Through real workers and signals: tests/queues/processes/test_resume.py."""

import pytest
from rq.job import JobStatus

import queues
from queues.catalog.lookup import OptimaJob
from queues.exceptions import InvalidJob
from queues.jobs import resume
from tests.jobs import long
from tests.support.worker import run_burst


def test_inline_a_long_job_checkpoints_in_memory_and_runs_to_its_end(tmp_path):
    path = tmp_path / "items.jsonl"
    with queues.testing.inline():
        job = queues.enqueue("default", long.walk, str(path), 3, max_run_seconds=0.001)
    assert long.done(path) == [0, 1, 2]  # never paused inline, whatever its max_run_seconds
    assert job.meta["cursor"] == {"next": 3}
    assert job.meta["progress"] == {"percent": 100, "step": 3, "steps": 3}


def test_in_a_worker_the_cursor_and_the_progress_are_stored_with_the_job(queue_redis, tmp_path):
    path = tmp_path / "items.jsonl"
    job = queues.enqueue("default", long.walk, str(path), 4)
    run_burst(queue_redis)
    done = OptimaJob.fetch(job.id, connection=queue_redis)
    assert done.get_status() == JobStatus.FINISHED
    assert done.meta["cursor"] == {"next": 4}
    assert queues.job_state(job.id).progress == {"percent": 100, "step": 4, "steps": 4}
    assert [r["cursor"] for r in long.records(path) if r["event"] == "run"] == [0]  # the first run: cursor None


@pytest.mark.parametrize(
    "kind,message",
    [
        ("set", r"must be a JSON value .* got set \{1, 2\}"),
        ("nan", r"must be a JSON value .* got dict \{'next': nan\}"),
        ("big", r"20002 bytes of JSON, more than 16384"),
        ("done_alone", r"done needs total="),
    ],
)
def test_a_checkpoint_that_is_not_json_or_too_big_is_refused_naming_the_value_and_the_fix(kind, message):
    with queues.testing.inline(), pytest.raises(ValueError, match=message) as raised:
        queues.enqueue("default", long.checkpoint_badly, kind)
    assert "checkpoint" in str(raised.value)


def test_the_cursor_is_read_back_as_json_would_store_it():
    assert resume.check_cursor(("a", 1)) == ["a", 1]
    assert resume.check_cursor(None) is None


@pytest.mark.parametrize("value", [0, -1, "10", True, float("nan"), float("inf"), [5]])
def test_max_run_seconds_must_be_a_positive_number(queue_redis, value):
    with pytest.raises(InvalidJob, match=r"max_run_seconds must be") as raised:
        queues.enqueue("default", long.walk, "/nowhere", 1, max_run_seconds=value)
    assert repr(value) in str(raised.value)
    with pytest.raises(InvalidJob, match=r"max_run_seconds must be"):
        queues.enqueue_many("default", long.walk, [("/nowhere", 1)], max_run_seconds=value)
    assert queues.get_queue("default").count == 0


def test_max_run_seconds_is_stored_with_the_job_and_is_the_apps_own_meta_key(queue_redis):
    job = queues.enqueue("default", long.walk, "/nowhere", 1, max_run_seconds=2.5)
    assert OptimaJob.fetch(job.id, connection=queue_redis).meta["max_run_seconds"] == 2.5
    [many] = queues.enqueue_many("default", long.walk, [("/nowhere", 1)], max_run_seconds=30)
    assert OptimaJob.fetch(many.id, connection=queue_redis).meta["max_run_seconds"] == 30
    for key in ("cursor", "max_run_seconds"):
        with pytest.raises(InvalidJob, match=f"has the key '{key}', which the app owns"):
            queues.enqueue_call("default", long.walk, ["/nowhere", 1], meta={key: 1})


def test_a_queues_max_run_seconds_is_the_default_that_an_enqueue_overrides(queue_redis, settings):
    settings.OPTIMA_QUEUES = {**settings.OPTIMA_QUEUES, "default": {"max_run_seconds": 120}}
    queued = queues.enqueue("default", long.walk, "/nowhere", 1)
    own = queues.enqueue("default", long.walk, "/nowhere", 1, max_run_seconds=5)
    [many] = queues.enqueue_many("default", long.walk, [("/nowhere", 1)])
    meta = {job.id: OptimaJob.fetch(job.id, connection=queue_redis).meta for job in (queued, own, many)}
    assert [meta[job.id]["max_run_seconds"] for job in (queued, own, many)] == [120, 5, 120]


@pytest.mark.parametrize("value", [0, -3, "600", True])
def test_a_queues_max_run_seconds_that_is_not_a_positive_number_is_a_check_error(value):
    from queues import conf

    [problem] = conf.validate_job_options("OPTIMA_QUEUES['default']", {"max_run_seconds": value})
    assert problem.id == "queues.E005"
    assert f"OPTIMA_QUEUES['default']['max_run_seconds'] must be a number of seconds > 0 or None, got {value!r}." == (
        problem.msg
    )
    assert conf.validate_job_options("OPTIMA_QUEUES['default']", {"max_run_seconds": None}) == []


def test_a_pause_retried_through_an_outage_is_written_once_when_the_first_write_landed(queue_redis):
    job = queues.enqueue("default", long.walk, "/nowhere", 1)
    queue_redis.hset(job.key, "status", "started")
    writes = []
    attempt = resume.idempotent(queue_redis, job, JobStatus.QUEUED, lambda: writes.append("push"))
    attempt()  # the first try writes (its reply may be lost: record_for tries again)
    attempt()  # the status is still started: the first write did not land, write again
    queue_redis.hset(job.key, "status", "queued")  # it landed
    attempt()
    assert writes == ["push", "push"]
