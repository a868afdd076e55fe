"""The outbox with real processes: a process SIGKILLed right after its commit, and a Redis stopped
for 30 s around 100 enqueues. Every accepted job runs (queues/producer/outbox.py)."""

import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import queues
from queues.models import OutboxEntry
from queues.producer import outbox
from tests.support import ROOT, wait_for
from tests.support.clock import hold_outage
from tests.support.outages import OUTAGE_SECONDS, DurableRedisServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOUCH = "tests.jobs.sample.touch"


@pytest.fixture
def private_redis(settings):
    """A private Redis with persistence (it keeps its data across stop/start); this process enqueues to it."""
    server = DurableRedisServer().start()
    settings.QUEUES_REDIS_URL = server.url
    yield server
    server.stop()
    shutil.rmtree(server.workdir, ignore_errors=True)


def lines(path):
    return path.read_text().split() if path.exists() else []


def test_a_process_killed_right_after_its_commit_loses_no_job(private_redis, subprocess_env, start_worker, tmp_path):
    """The process commits, then SIGKILL reaches it before it can write the job to Redis (a commit
    callback registered before the enqueue's own kills it): the row is committed, the job is not in
    Redis. A worker's relay writes it, and it runs once."""
    ran = tmp_path / "ran.txt"
    script = textwrap.dedent(f"""
        import os, signal
        import django
        django.setup()
        from django.db import transaction
        import queues
        with transaction.atomic():
            transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
            job = queues.enqueue("default", {TOUCH!r}, {str(ran)!r}, "killed-after-commit")
            print(job.id, flush=True)
    """)
    env = dict(subprocess_env, REDIS_URL=private_redis.url, DJANGO_SETTINGS_MODULE="optima_site.settings")
    child = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    job_id = child.stdout.strip()
    # Committed, and still claimed by the killed process for PUSH_GRACE seconds from its insert.
    assert list(OutboxEntry.objects.values_list("job_id", flat=True)) == [job_id]
    assert queues.fetch_job(job_id) is None  # committed, never written to Redis

    worker = start_worker("default", env={"REDIS_URL": private_redis.url})
    wait_for(lambda: lines(ran), timeout=60, message="the relayed job to run")
    wait_for(lambda: not OutboxEntry.objects.exists(), timeout=30, message="the row to be deleted")
    # The job wrote its line before the worker records its success: wait for that, do not race it (failed CI).
    wait_for(lambda: queues.fetch_job(job_id).get_status() == "finished", timeout=30, message="the job to finish")
    # Nothing is left for a relay to write again: the relay's own function, run here, finds no row ...
    assert outbox.relay_all() == (0, 0)
    # ... and the worker went on past its relays (one runs before each pop when due): a later job ran, once.
    later = tmp_path / "later.txt"
    queues.enqueue("default", TOUCH, str(later), "later")
    wait_for(lambda: lines(later), timeout=60, message="a later job to run")
    assert lines(ran) == ["killed-after-commit"]
    assert worker.process.poll() is None, worker.output()


def test_100_enqueues_around_a_30_s_redis_outage_all_run(private_redis, start_worker, tmp_path):
    """20 enqueues before Redis stops, 60 while it is down (in transactions, and durable=True
    outside one), 20 after it is back: each is accepted at once, and each runs."""
    from django.db import transaction

    ran = tmp_path / "ran.txt"
    worker = start_worker("default", env={"REDIS_URL": private_redis.url})

    def enqueue(i):
        if i % 2:
            return queues.enqueue("default", TOUCH, str(ran), str(i), durable=True)
        with transaction.atomic():
            return queues.enqueue("default", TOUCH, str(ran), str(i))

    accepted = [enqueue(i).id for i in range(20)]
    private_redis.process.send_signal(signal.SIGTERM)  # stops, writing its snapshot
    private_redis.process.wait(30)
    stopped = time.monotonic()
    for n, i in enumerate(range(20, 80), 1):
        accepted.append(enqueue(i).id)
        hold_outage(stopped, n * (OUTAGE_SECONDS - 5) / 60)  # spread over the outage's first 25 s
    assert OutboxEntry.objects.count() >= 60  # while Redis is down they wait in the outbox
    hold_outage(stopped, OUTAGE_SECONDS)
    private_redis.start()
    accepted += [enqueue(i).id for i in range(80, 100)]

    assert len(set(accepted)) == 100
    wait_for(
        lambda: set(lines(ran)) == {str(i) for i in range(100)},
        timeout=120,
        message=f"all 100 jobs to run (ran so far: {len(set(lines(ran)))})",
    )
    wait_for(lambda: not OutboxEntry.objects.exists(), timeout=30, message="the outbox to be empty")
    assert worker.process.poll() is None, worker.output()


def test_four_relay_processes_at_once_push_each_row_exactly_once(settings, subprocess_env, tmp_path, queue_redis):
    """300 rows left behind (Redis refused at their commits), then four `manage.py queues_relay`
    processes started together: their counts add up to 300 (no row claimed twice) and the queue
    holds each job once."""
    from django.db import transaction

    from queues.catalog.lookup import get_queue

    up = settings.QUEUES_REDIS_URL
    settings.QUEUES_REDIS_URL = "redis://127.0.0.1:1/0"  # refused: every push fails, rows stay
    with transaction.atomic():
        staged = {queues.enqueue("default", TOUCH, str(tmp_path / "never.txt"), str(i)).id for i in range(300)}
    settings.QUEUES_REDIS_URL = up
    assert OutboxEntry.objects.filter(claimed_until__isnull=True).count() == 300

    relays = [
        subprocess.Popen(
            [sys.executable, "manage.py", "queues_relay"],
            cwd=ROOT,
            env=subprocess_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [relay.communicate(timeout=120)[0] for relay in relays]
    assert [relay.returncode for relay in relays] == [0, 0, 0, 0], outputs
    pushed = [int(out.rsplit("Outbox: ", 1)[1].split(" pushed")[0]) for out in outputs]
    assert sum(pushed) == 300, outputs
    job_ids = get_queue("default", connection=queue_redis).job_ids
    assert len(job_ids) == 300 and set(job_ids) == staged
    assert not OutboxEntry.objects.exists()
