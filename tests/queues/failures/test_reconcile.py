"""The dead letters' reconcile over two real redis-servers (queues/failures/reconcile.py, issue 36): a queue's
dead jobs are in its own server's failed registry, and only that server's reconcile judges its rows."""

import pytest

import queues
from queues.catalog.lookup import get_queue
from queues.connection import clients
from queues.failures import deadletter
from queues.models import DeadLetter
from tests.support.lifecycle import fetch
from tests.support.panel import dead_job

pytestmark = pytest.mark.django_db(transaction=True)


def _dead_on_b():
    job = queues.enqueue("on-b", "tests.jobs.lifecycle.quick", 1)
    deadletter.bury(fetch(job.id, get_queue("on-b").connection), reason="abandoned")
    return job


def test_the_default_servers_reconcile_leaves_server_bs_rows_alone(second_redis):
    job = _dead_on_b()
    summary = deadletter.reconcile(connection=clients.get_connection())  # a worker of the default server's
    assert (summary.held, "on-b" in summary.queues) == (0, False)
    row = DeadLetter.objects.get(job_id=job.id)
    assert (row.status, row.only_in_database_since) == ("open", None)
    assert deadletter.reconcile(["on-b"], connection=clients.get_connection()).queues == []


def test_a_reconcile_of_every_server_mirrors_bs_dead_jobs_and_judges_them_on_b(second_redis):
    job = _dead_on_b()
    DeadLetter.objects.filter(job_id=job.id).delete()  # e.g. the database was down when it died
    summary = deadletter.reconcile()
    assert (summary.mirrored, summary.held) == (1, 0)
    assert "on-b" in summary.queues and "default" in summary.queues
    assert DeadLetter.objects.get(job_id=job.id).queue == "on-b"
    get_queue("on-b").connection.delete(fetch(job.id, get_queue("on-b").connection).key)
    assert deadletter.reconcile(["on-b"]).held == 1  # gone from b: now held only in the database


@pytest.mark.django_db
def test_a_dead_job_of_a_mebibyte_is_mirrored_as_the_dead_letter_it_is_not_as_a_corrupt_one():
    """Reconcile reads a dead job as large as a producer writes (``jobs.read.RUN``), not only as large as a panel page
    shows whole: such a job became a ``corrupt`` dead letter, which is never retried."""
    job, _ = dead_job("default", args=(2, "x" * (1024 * 1024)), row=False)
    summary = deadletter.reconcile()
    row = DeadLetter.objects.get(job_id=job.id)
    assert (row.reason, row.func_path, summary.errors) == ("exhausted", "tests.jobs.sample.add", 0)
