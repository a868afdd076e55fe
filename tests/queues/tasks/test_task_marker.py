"""A ``task`` marker on a job that runs no Task (issue 32, finding 7): refused at enqueue, ignored at run."""

import pytest
from django_tasks.exceptions import TaskResultDoesNotExist

import queues
from queues.jobs import meta as jobmeta
from queues.producer import api
from tests.jobs import tasks

MARKER = {"task": {"backend": "default"}}


@pytest.mark.parametrize("key", ["task", "attempt", "dead", "schedule", "retry_of", "worker_ids", "queue"])
def test_the_public_api_refuses_a_meta_key_the_app_owns_naming_the_item_the_key_and_the_fix(key, queue_redis, settings):
    meta = {key: {"backend": "default"}, "why": "sale"}
    # This test's prefix only: other xdist workers share the Redis, and their jobs come and go meanwhile. An earlier
    # test's worker may leave its jobs' keys behind.
    jobs = f"{settings.QUEUE_PREFIX}:job:*"
    before = set(queue_redis.keys(jobs))
    with pytest.raises(queues.InvalidJob) as batch:
        queues.enqueue_many("default", "tests.jobs.sample.add", [(1, 2), queues.Call(args=[3, 4], meta=meta)])
    with pytest.raises(queues.InvalidJob) as common:
        queues.enqueue_many("default", "tests.jobs.sample.add", [(1, 2)], meta=meta)
    with pytest.raises(queues.InvalidJob) as single:
        queues.enqueue_call("default", "tests.jobs.sample.add", [1, 2], meta=meta)
    assert str(batch.value).startswith(f"calls[1]: meta has the key {key!r}, which the app owns")
    assert str(batch.value).endswith("Nothing of the batch was enqueued.")
    for caught in (batch, common, single):
        assert f"Rename the key (e.g. {'my_' + key!r})" in str(caught.value)
        assert "meta=queues.owner_meta(...)" in str(caught.value)
    assert set(queue_redis.keys(jobs)) == before  # nothing of them was written


def test_owner_and_a_callers_own_keys_are_accepted_and_a_task_still_carries_its_marker(queue_redis):
    jobs = queues.enqueue_many(
        "default", "tests.jobs.sample.add", [queues.Call(args=[1, 2], meta={**queues.owner_meta(7), "why": "sale"})]
    )
    assert (jobs[0].meta["owner"], jobs[0].meta["why"], "task" in jobs[0].meta) == (7, "sale", False)
    result = tasks.add.enqueue(1, 2)
    assert queues.fetch_job(result.id).meta["task"] == {"backend": "default"}
    with pytest.raises(queues.InvalidJob, match="meta has the key 'task'"):
        tasks.add.using(meta=MARKER).enqueue(1, 2)


def test_the_app_owned_set_names_every_key_the_app_writes_but_owner():
    written = {value for name, value in vars(jobmeta).items() if name.isupper() and isinstance(value, str)}
    # a band names no key; PUT_BACK and EXECUTION are fields of the job's hash, not of its meta, and PUT_BACK's
    # values name paths
    hash_fields = {value for name, value in vars(jobmeta).items() if name.startswith("PUT_BACK")} | {jobmeta.EXECUTION}
    assert written - jobmeta.APP_OWNED - set(jobmeta.BANDS) - hash_fields == {"owner"}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_plain_job_carrying_a_task_marker_runs_without_an_error_line(queue_redis, start_worker):
    """What the app's own path (or a job of an older release) can still write: the receivers skip it."""
    job = api.enqueue_call_as_app("default", "tests.jobs.sample.add", [2, 3], meta=dict(MARKER))
    task_result = tasks.add.enqueue(4, 5)
    for _ in range(2):  # every run: the job enqueued again
        worker = start_worker("default", "--burst")
        assert worker.wait(60) == 0, worker.output()
        errors = [line for line in worker.output().splitlines() if " ERROR " in line or " WARNING " in line]
        assert errors == []  # it was two ERROR lines on every run
        assert queues.fetch_job(job.id).get_status() == "finished"
        job = api.enqueue_call_as_app("default", "tests.jobs.sample.add", [2, 3], meta=dict(MARKER))
    assert tasks.add.get_result(task_result.id).return_value == 9  # a real Task still gets its receivers


@pytest.mark.parametrize(
    "args, kwargs",
    [({"a": 1, "b": 2}, {}), ("ab", {}), (7, {}), ([1, 2], ["k", "v"]), ([1, 2], "kv"), (None, {})],
)
def test_get_result_of_a_job_whose_stored_args_are_no_list_says_it_is_unreadable_never_the_keys(
    args, kwargs, queue_redis
):
    import json
    import zlib

    result = tasks.add.enqueue(1, 2)
    job = queues.fetch_job(result.id)
    queue_redis.hset(job.key, "data", zlib.compress(json.dumps([job.func_name, None, args, kwargs]).encode()))
    with pytest.raises(TaskResultDoesNotExist) as caught:  # it was a result whose args were ["a", "b"]
        tasks.add.get_result(result.id)
    assert f"Job {result.id} cannot be read as a task (data is not [function, instance, args, kwargs]" in str(
        caught.value
    )
    state = queues.job_state(result.id)
    assert (state.state, state.why.startswith("data is not [function, instance, args, kwargs]")) == ("corrupt", True)


@pytest.mark.django_db
def test_get_result_of_an_outbox_row_whose_stored_args_are_a_mapping_says_it_is_unreadable(queue_redis):
    import base64
    import json
    import zlib

    from django.db import transaction

    from queues.models import OutboxEntry

    with transaction.atomic():  # the row stays: no commit in this test's transaction
        result = tasks.add.enqueue(1, 2)
    entry = OutboxEntry.objects.get(job_id=result.id)
    payload = json.dumps(["tests.jobs.tasks.add", None, {"a": 1, "b": 2}, {}]).encode()
    entry.job = {**entry.job, "data": {"b64": base64.b64encode(zlib.compress(payload)).decode()}}
    entry.save()
    with pytest.raises(TaskResultDoesNotExist, match="its stored args are dict and its kwargs dict"):
        tasks.add.get_result(result.id)
