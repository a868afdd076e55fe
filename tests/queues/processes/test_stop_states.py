"""Issue 32, finding 10: a worker stops after SIGTERM, whatever it did before and whatever it is doing.

A worker with ``--grace 3`` was once still alive 19 s after SIGTERM, both its threads waiting on a futex,
after it had run retries, outbox relays, a ``run_after`` task and async tasks. Here real workers of each
kind (forking, ``--no-fork``, ``--concurrency 8``; each runs RQ's scheduler, the default) are put in each
of those states and sent SIGTERM, round after round; each must exit 0 within its grace plus a generous
margin (a correctness bound, not a timing). A worker that does not gets ``kill -USR1`` (rqworker's
stack dump, faulthandler) and the test fails naming the kind, the state and the round, with the stacks.

``OPTIMA_STOP_ROUNDS`` (default 1) runs every (kind, state) pair that many times: the hunt for a rare
hang, e.g. ``OPTIMA_STOP_ROUNDS=20``; ``OPTIMA_STOP_DEADLINE`` (seconds, default grace + 12) makes it stricter.
"""

import datetime as dt
import os
import signal
import subprocess

import pytest
from django.db import transaction
from django.utils import timezone
from rq.worker import Worker

import queues
from queues.catalog.lookup import get_queue
from queues.models import OutboxEntry
from tests.jobs.resilience import ends, starts
from tests.support import wait_for

# marker once: what is tested is a worker process's exit on SIGTERM; the database only keeps what it leaves, so
# CI's PostgreSQL pass leaves these out (~2 min of CI).
pytestmark = [pytest.mark.slow, pytest.mark.once, pytest.mark.django_db(transaction=True)]

GRACE = 3  # --grace of every worker here, as in the report
DEADLINE = float(os.environ.get("OPTIMA_STOP_DEADLINE", GRACE + 12))  # seconds from SIGTERM to exit: grace + margin
ROUNDS = int(os.environ.get("OPTIMA_STOP_ROUNDS", "1"))
DOWN = "redis://127.0.0.1:1/0"  # port 1: refused at once (the outbox keeps the job as a row)

KINDS = {
    "forking": [],
    "no-fork": ["--no-fork"],
    "concurrency-8": ["--concurrency", "8"],
}


def lines(path):
    return path.read_text().split() if path.exists() else []


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(child) for child in f.read().split()]
    except OSError:
        return []


class Round:
    """One worker of one kind, put in one state, then sent SIGTERM."""

    def __init__(self, kind, state, number, start_worker, server, client, settings, tmp_path):
        self.kind, self.state, self.number = kind, state, number
        self.server, self.client, self.settings = server, client, settings
        self.dir = tmp_path / f"{kind}-{state}-{number}"
        self.dir.mkdir()
        self.worker = start_worker("default", "--grace", str(GRACE), *KINDS[kind], env={"REDIS_URL": server.url})

    def name(self):
        return f"{self.kind} worker, state {self.state!r}, round {self.number}"

    def registered(self):
        wait_for(
            lambda: any(w.pid == self.worker.pid for w in Worker.all(connection=self.client)),
            timeout=60,
            message=f"the {self.name()} to register",
        )

    # -- the states: each leaves the worker in it, alive -------------------------------------
    def idle(self):
        self.registered()

    def mid_job(self):
        log = self.dir / "runs.jsonl"
        queues.enqueue("default", "tests.jobs.resilience.logged_sleep", str(log), first_run_seconds=600)
        wait_for(lambda: starts(log), timeout=60, message=f"the job of the {self.name()} to start")

    def after_retries(self):
        log = self.dir / "runs.jsonl"
        queues.enqueue("default", "tests.jobs.resilience.fail_on_first_run", str(log), attempts=3)
        wait_for(lambda: ends(log), timeout=60, message=f"the retried job of the {self.name()} to succeed")

    def after_outbox_relay(self):
        touched = self.dir / "touched.txt"
        up = self.settings.QUEUES_REDIS_URL
        self.settings.QUEUES_REDIS_URL = DOWN  # the commit's own push fails: the row stays for a relay
        try:
            with transaction.atomic():
                queues.enqueue("default", "tests.jobs.sample.touch", str(touched), "relayed")
        finally:
            self.settings.QUEUES_REDIS_URL = up
        OutboxEntry.objects.update(claimed_until=timezone.now() - dt.timedelta(seconds=1))  # not held: relay it
        wait_for(lambda: lines(touched), timeout=60, message=f"the {self.name()} to relay the outbox row")

    def after_run_after_task(self):
        from tests.jobs.tasks import record

        path = self.dir / "task.txt"
        record.using(run_after=timezone.now() + dt.timedelta(seconds=1)).enqueue(str(path), "later")
        wait_for(lambda: lines(path), timeout=60, message=f"the run_after task of the {self.name()} to run")

    def after_async_tasks(self):
        from tests.jobs.tasks import add_later

        results = [add_later.enqueue(n, 1) for n in range(4)]
        wait_for(
            lambda: all(r.refresh() or r.is_finished for r in results),
            timeout=60,
            message=f"the async tasks of the {self.name()} to finish",
        )

    def after_all_of_them(self):
        """The report's sequence: retries, an outbox relay, a run_after task, async tasks; then a job runs."""
        self.after_retries()
        self.after_outbox_relay()
        self.after_run_after_task()
        self.after_async_tasks()
        self.mid_job()

    def during_redis_blip(self):
        self.registered()
        self.server.stop()  # back right after the SIGTERM (``stop``)

    STATES = ("idle", "mid_job", "after_retries", "after_outbox_relay", "after_run_after_task", "after_async_tasks")
    STATES += ("after_all_of_them", "during_redis_blip")

    # -- the stop ---------------------------------------------------------------------------
    def stop(self):
        self.worker.signal(signal.SIGTERM)
        if self.state == "during_redis_blip":
            self.server.start()
        try:
            code = self.worker.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            for pid in [self.worker.pid, *children(self.worker.pid)]:  # its horse, RQ's scheduler: theirs too
                os.kill(pid, signal.SIGUSR1)  # every thread's stack into the output (rqworker's faulthandler)
            wait_for(lambda: "most recent call first" in self.worker.output(), timeout=10, message="the stacks")
            self.worker.process.kill()
            self.worker.wait(10)
            pytest.fail(
                f"the {self.name()} was still alive {DEADLINE} s after SIGTERM (grace {GRACE} s); its output, "
                f"stacks at the end:\n{self.worker.output()[-20000:]}"
            )
        assert code == 0, f"the {self.name()} exited {code}:\n{self.worker.output()[-8000:]}"

    def clean(self):
        """Nothing of this round is left for the next worker to run."""
        queue = get_queue("default")
        queue.empty()
        for registry in (queue.scheduled_job_registry, queue.started_job_registry):
            for job_id in registry.get_job_ids():
                registry.remove(job_id)
        OutboxEntry.objects.all().delete()


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_worker_sent_sigterm_in_any_state_exits_within_its_grace_and_a_margin(
    kind, start_worker, outage_redis, settings, tmp_path
):
    server, client = outage_redis(durable=True)
    for number in range(1, ROUNDS + 1):
        for state in Round.STATES:
            round_ = Round(kind, state, number, start_worker, server, client, settings, tmp_path)
            getattr(round_, state)()
            round_.stop()
            round_.clean()
