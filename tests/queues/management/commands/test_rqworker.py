"""``manage.py rqworker`` on several Redis servers (issue 36): a worker serves the queues of one server, given by
their names or ``--server NAME``; queues of two servers are refused. Real worker processes, two real
redis-servers: the session's (the default server) and ``second_redis``'s (server ``b``: ``on-b``, ``on-b-2``)."""

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

import queues
from queues.catalog.lookup import get_queue
from queues.failures import operations
from queues.models import DeadLetter
from tests.support import wait_for


def test_queues_of_two_servers_are_refused_naming_each_ones_server(second_redis):
    with pytest.raises(CommandError) as excinfo:
        call_command("rqworker", "on-b", "default", "--burst")
    assert str(excinfo.value) == (
        "The queues given live on 2 Redis servers: 'b' (on-b); 'default' (default). A worker serves the queues of "
        "one server (its connection is theirs): start one worker per server, e.g. 'rqworker --server b' and "
        "'rqworker --server default' (docs/settings.md#several-redis-servers)."
    )


def test_server_names_and_queue_names_must_agree(second_redis):
    with pytest.raises(CommandError, match=r"^--server 'nope' names no Redis server: the servers are 'default', 'b'"):
        call_command("rqworker", "--server", "nope", "--burst")
    with pytest.raises(
        CommandError, match=r"^--server 'b' was given queues of other Redis servers: 'default' \(default\)"
    ):
        call_command("rqworker", "--server", "b", "on-b", "default", "--burst")


@pytest.mark.slow
def test_a_worker_of_server_b_runs_bs_jobs_and_leaves_the_default_servers_alone(
    second_redis, server_b_env, start_worker, queue_redis
):
    on_b = [queues.enqueue("on-b", "tests.jobs.sample.add", i, 1) for i in range(3)]
    on_b_2 = queues.enqueue("on-b-2", "tests.jobs.sample.add", 10, 1)
    on_default = queues.enqueue("default", "tests.jobs.sample.add", 5, 5)
    worker = start_worker("--server", "b", "--burst", env=server_b_env)
    assert worker.wait(60) == 0, worker.output()
    assert [queues.fetch_job(job.id).return_value() for job in on_b] == [1, 2, 3]
    assert queues.fetch_job(on_b_2.id).return_value() == 11
    assert get_queue("default").job_ids == [on_default.id]
    assert queues.fetch_job(on_default.id).get_status() == "queued"
    b = redis.Redis.from_url(second_redis.url)
    assert b.exists(on_b_2.key) == 1 and queue_redis.exists(on_b_2.key) == 0


@pytest.mark.slow
def test_a_dead_letter_of_server_b_is_retried_and_discarded_on_b(second_redis, server_b_env, start_worker, queue_redis):
    job = queues.enqueue("on-b", "tests.jobs.lifecycle.fail_permanently", "gone")
    worker = start_worker("on-b", "--burst", env=server_b_env)
    assert worker.wait(60) == 0, worker.output()
    row = wait_for(lambda: DeadLetter.objects.filter(job_id=job.id).first(), message="the dead letter's row")
    assert row.queue == "on-b"
    b_queue = get_queue("on-b")
    outcome = operations.retry_dead_letter(row.pk)
    assert (outcome.outcome, outcome.job_id) == ("ok", job.id), outcome
    assert b_queue.job_ids == [job.id]  # requeued in place, on b
    assert queue_redis.exists(b_queue.key) == 0 and queue_redis.exists(queues.fetch_job(job.id).key) == 0
    worker = start_worker("on-b", "--burst", env=server_b_env)
    assert worker.wait(60) == 0, worker.output()
    wait_for(lambda: DeadLetter.objects.get(pk=row.pk).status == "open", message="the row open again")
    assert operations.discard_dead_letter(row.pk).outcome == "ok"
    assert queues.fetch_job(job.id) is None
    assert list(redis.Redis.from_url(second_redis.url).scan_iter(match=f"*{job.id}*")) == []


@pytest.mark.slow
def test_a_worker_given_no_names_serves_the_default_servers_queues_and_says_which_it_leaves_out(
    second_redis, server_b_env, start_worker
):
    on_b = queues.enqueue("on-b", "tests.jobs.sample.add", 1, 2)
    on_default = queues.enqueue("default", "tests.jobs.sample.add", 3, 4)
    worker = start_worker("--burst", env=server_b_env)
    assert worker.wait(60) == 0, worker.output()
    assert queues.fetch_job(on_default.id).return_value() == 7
    assert queues.fetch_job(on_b.id).get_status() == "queued"
    assert (
        "Serving the default Redis server's queues; those of b need a worker of their own (--server NAME)."
        in worker.output()
    )
