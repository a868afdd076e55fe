"""Rolling deploys: workers and enqueuers of two releases share one Redis, one prefix, one database.

During a deploy, jobs, meta and Redis keys written by the release in production are read by the new
release, and the other way round (a rollback, or old workers still draining while new web processes
enqueue). The *old release* is frozen in ``tests/compat/release-fdf9480.tar.gz`` (tests/compat/README.md
says how it was made and when to refresh it); it is extracted once per session and run as real
``manage.py`` processes from that tree, with this session's interpreter, Redis, ACL user, prefix and
database. The *new release* is the working tree: this process (enqueueing) and ``start_worker``.

The state is read back with plain rq 3.0 (``rq.job.Job`` with the JSON serializer, rq's registries),
the ground both releases stand on, so the assertions do not depend on either release's internals.
The meta keys asserted here (``COMPAT_META``, ``DEAD_META``) are the contract between releases.

Job functions come from ``tests/jobs`` (each tree has its own copy under the same dotted paths).
Worker processes of both releases load ``mixed_versions_settings`` (written at session start into a
directory on PYTHONPATH): the site's settings of *their own* tree plus short liveness options.
"""

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry
from rq.serializers import JSONSerializer
from rq.worker import Worker

from tests.jobs.resilience import ends, starts
from tests.support import ROOT, poll
from tests.support.processes import WorkerProcess
from tests.support.worker import w063

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

OLD_COMMIT = "fdf9480"
TARBALL = ROOT / "tests" / "compat" / f"release-{OLD_COMMIT}.tar.gz"
# The release before it (kept: the one a rollback returns to), and one up to 6f24d7d: its workers tell a running
# job from an abandoned one by rq's execution hash alone, which this release no longer writes by default
# (RQ_EXECUTION_RECORDS, queues/jobs/execution.py; the check queues.W063 names them).
RECORDS_COMMIT = "a8814b4"

# Seconds. Short liveness, so that a killed worker is noticed in a few seconds (defaults: 10 / 2 / 5).
# The TTL stays at six beats, so a busy machine does not make a live worker look dead (a double run
# would fail the exactly-once test for the wrong reason).
LIVENESS_TTL, LIVENESS_INTERVAL, ABANDONED_SCAN = 6, 1, 1
SETTINGS_MODULE = "mixed_versions_settings"
SETTINGS_SOURCE = f'''"""Workers of the mixed-versions tests: the site settings of the tree the process runs from
(its cwd, first on sys.path), plus short liveness options. Shared by both releases."""
from optima_site.settings import *  # noqa: F401,F403

OPTIMA_QUEUES_OPTIONS = {{
    "LIVENESS_TTL_SECONDS": {LIVENESS_TTL},
    "LIVENESS_INTERVAL_SECONDS": {LIVENESS_INTERVAL},
    "ABANDONED_SCAN_SECONDS": {ABANDONED_SCAN},
}}
'''

# Meta an enqueuer writes and every worker must read (queues.enqueue since bb8470f).
COMPAT_META = ("queue", "attempt", "attempts_allowed")
# Meta a worker writes when a job dies, read by the other release's reconcile, panel and requeue.
DEAD_META = ("dead", "attempts_made", "attempts_allowed", "exc_type", "exc_message", "deaths")

# Run by the old tree's ``manage.py shell``: enqueue a spec through the public API, print the ids.
ENQUEUE_SCRIPT = """
import json, os, queues, tests.jobs.lifecycle
ids = {}
for label, item in json.loads(os.environ["COMPAT_ENQUEUE_SPEC"]).items():
    job = queues.enqueue_call(item["queue"], item["func"], args=item.get("args", []),
                              kwargs=item.get("kwargs", {}), **item.get("options", {}))
    ids[label] = job.id
print("COMPAT-RESULT " + json.dumps({"ids": ids, "queues_module": queues.__file__,
                                     "jobs_module": tests.jobs.lifecycle.__file__}))
"""


@dataclass(frozen=True)
class Release:
    label: str  # in failure messages: who wrote, who read
    tree: Path

    @property
    def is_old(self):
        return self.tree != ROOT

    def __str__(self):
        return self.label


@dataclass
class Setup:
    old: Release
    new: Release
    settings_dir: Path


def extracted(tmp_path_factory, commit):
    """The frozen release ``commit``'s tree, extracted under a new temporary directory."""
    tarball = ROOT / "tests" / "compat" / f"release-{commit}.tar.gz"
    assert tarball.is_file(), f"{tarball} is missing: tests/compat/README.md says how to build it"
    dest = tmp_path_factory.mktemp(f"release-{commit}")
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    tree = dest / f"release-{commit}"
    assert (tree / "manage.py").is_file(), f"{tarball} has no release-{commit}/manage.py"
    return tree


@pytest.fixture(scope="session")
def releases(tmp_path_factory):
    """The old release extracted once per session, and the settings module both releases' workers load."""
    tree = extracted(tmp_path_factory, OLD_COMMIT)
    settings_dir = tmp_path_factory.mktemp("mixed-versions-settings")
    (settings_dir / f"{SETTINGS_MODULE}.py").write_text(SETTINGS_SOURCE)
    return Setup(
        old=Release(f"old release {OLD_COMMIT}", tree),
        new=Release("new release (working tree)", ROOT),
        settings_dir=settings_dir,
    )


@pytest.fixture
def release_env(subprocess_env, releases):
    # Both releases sign their jobs with the same key and verify the other's: no unsigned window.
    return dict(
        subprocess_env,
        DJANGO_SETTINGS_MODULE=SETTINGS_MODULE,
        PYTHONPATH=os.pathsep.join(filter(None, [str(releases.settings_dir), os.environ.get("PYTHONPATH")])),
    )


class TreeWorkerProcess(WorkerProcess):
    """``manage.py rqworker`` of a given release's tree (tests.support.processes.WorkerProcess runs this one)."""

    def __init__(self, args, env, log_path, cwd):
        self.args = args
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", *args], cwd=cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )


@pytest.fixture
def run_worker(start_worker, release_env, tmp_path, queue_redis):
    """``run_worker(release, "default", ...)`` -> a registered worker of that release, named after it
    (``old-…``/``new-…``, so ``job.worker_name`` tells which release ran a job). Stopped at teardown."""
    old_ones = []

    def run(release, *args):
        name = f"{'old' if release.is_old else 'new'}-{uuid.uuid4().hex[:8]}"
        argv = [*args, "--name", name]
        if release.is_old:
            proc = TreeWorkerProcess(["rqworker", *argv], release_env, tmp_path / f"rqworker-{name}.log", release.tree)
            old_ones.append(proc)
        else:
            proc = start_worker(*argv, env=release_env)
        proc.name, proc.release = name, release
        wait(
            lambda: name in {w.name for w in Worker.all(connection=queue_redis)} or proc.process.poll() is not None,
            f"{release} worker {name} to register",
            proc,
        )
        assert proc.process.poll() is None, f"{release} worker {name} exited at start:\n{tail(proc)}"
        return proc

    yield run
    for proc in old_ones:
        proc.stop()


@pytest.fixture
def enqueue_with(release_env, tmp_path):
    """``enqueue_with(release, spec)`` -> {label: job id}: the release's ``queues.enqueue_call`` for each
    ``{label: {"queue", "func", "args", "kwargs", "options"}}``. The new release enqueues in this
    process; the old one in a ``manage.py shell`` of its tree."""

    def enqueue(release, spec):
        if not release.is_old:
            import queues

            return {
                label: queues.enqueue_call(
                    item["queue"],
                    item["func"],
                    args=item.get("args", []),
                    kwargs=item.get("kwargs", {}),
                    **item.get("options", {}),
                ).id
                for label, item in spec.items()
            }
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "--verbosity", "0", "-c", ENQUEUE_SCRIPT],
            cwd=release.tree,
            env=dict(release_env, COMPAT_ENQUEUE_SPEC=json.dumps(spec)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("COMPAT-RESULT ")]
        assert done.returncode == 0 and len(lines) == 1, (
            f"{release} could not enqueue (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
        )
        result = json.loads(lines[0].split(" ", 1)[1])
        for key in ("queues_module", "jobs_module"):  # the old code ran, not the working tree's
            assert Path(result[key]).resolve().is_relative_to(release.tree.resolve()), (
                f"{release}'s enqueuer imported {result[key]}, not its own tree's module"
            )
        return result["ids"]

    return enqueue


# --- reading the state with plain rq -----------------------------------------------------------


def fetch(job_id, connection):
    return Job.fetch(job_id, connection=connection, serializer=JSONSerializer)


def status(job_id, connection):
    return fetch(job_id, connection).get_status(refresh=False)


def runs(path):
    """Runs of ``tests.jobs.lifecycle.count_runs`` recorded in ``path`` (one line each)."""
    return len(Path(path).read_text().splitlines()) if Path(path).exists() else 0


def tail(proc, lines=40):
    return f"--- {proc.release} worker {proc.name} (last {lines} lines) ---\n" + "\n".join(
        proc.output().splitlines()[-lines:]
    )


def describe(connection, ids):
    """One line per job: what each release would see of it (for failure messages)."""
    out = []
    for label, job_id in ids.items():
        try:
            job = fetch(job_id, connection)
            latest = job.latest_result()
            out.append(
                f"  {label} {job_id}: status={job.get_status(refresh=False)} worker={job.worker_name} "
                f"meta={job.meta} latest_result={latest.type.name if latest else None}"
            )
        except Exception as exc:  # noqa: BLE001 — a message helper never hides the failure it describes
            out.append(f"  {label} {job_id}: unreadable ({type(exc).__name__}: {exc})")
    return "\n".join(out)


def wait(predicate, what, *procs, context=lambda: "", timeout=60.0):
    if not poll(predicate, timeout, interval=0.1):
        pytest.fail(
            f"timed out after {timeout}s waiting for {what}\n{context()}\n" + "\n".join(tail(p) for p in procs),
            pytrace=False,
        )


def contract_meta(job, keys=COMPAT_META):
    return {key: job.meta.get(key) for key in keys}


# --- a: the old release enqueues, a new worker runs; b: the other way round ---------------------


def mix_spec(tmp_path):
    """The mix: succeeds; fails once then succeeds (1 s backoff); always fails with attempts=2 (dead
    letter); delayed 1 s. ``count_runs`` records every run in its file."""
    return {
        "succeeds": {"queue": "default", "func": "tests.jobs.sample.add", "args": [2, 3]},
        "fails_once": {
            "queue": "default",
            "func": "tests.jobs.lifecycle.count_runs",
            "args": [str(tmp_path / "fails_once.runs")],
            "kwargs": {"fail_times": 1},
        },
        "always_fails": {
            "queue": "default",
            "func": "tests.jobs.lifecycle.count_runs",
            "args": [str(tmp_path / "always_fails.runs")],
            "kwargs": {"fail_times": 99},
            "options": {"attempts": 2},
        },
        "delayed": {
            "queue": "default",
            "func": "tests.jobs.lifecycle.count_runs",
            "args": [str(tmp_path / "delayed.runs")],
            "options": {"delay": 1},
        },
    }


@pytest.mark.parametrize(
    "writer_reader", [("old", "new"), ("new", "old")], ids=["old-enqueues-new-works", "new-enqueues-old-works"]
)
def test_a_mix_enqueued_by_one_release_is_processed_correctly_by_a_worker_of_the_other(
    writer_reader, releases, enqueue_with, run_worker, queue_redis, tmp_path
):
    from queues.models import DeadLetter

    writer, reader = (getattr(releases, side) for side in writer_reader)
    who = f"enqueued by the {writer}, processed by a worker of the {reader}"
    spec = mix_spec(tmp_path)
    ids = enqueue_with(writer, spec)

    # What the writer left in Redis, before any worker: the contract the reader's worker starts from.
    written = {
        label: (status(job_id, queue_redis), contract_meta(fetch(job_id, queue_redis))) for label, job_id in ids.items()
    }
    assert written == {
        "succeeds": ("queued", {"queue": "default", "attempt": 1, "attempts_allowed": 5}),
        "fails_once": ("queued", {"queue": "default", "attempt": 1, "attempts_allowed": 5}),
        "always_fails": ("queued", {"queue": "default", "attempt": 1, "attempts_allowed": 2}),
        "delayed": ("scheduled", {"queue": "default", "attempt": 1, "attempts_allowed": 5}),
    }, f"{writer} wrote jobs that differ from the contract (status, meta {COMPAT_META})"
    assert ScheduledJobRegistry("default", connection=queue_redis).get_job_ids() == [ids["delayed"]], (
        f"the {writer}'s delayed job is not in rq's scheduled registry <prefix>:scheduled:default"
    )

    worker = run_worker(reader, "default")
    failed = FailedJobRegistry("default", connection=queue_redis)

    def settled():
        return (
            all(status(ids[k], queue_redis) == JobStatus.FINISHED for k in ("succeeds", "fails_once", "delayed"))
            and ids["always_fails"] in failed
            and DeadLetter.objects.filter(job_id=ids["always_fails"]).exists()
        )

    wait(settled, f"every job {who} to finish or be dead-lettered", worker, context=lambda: describe(queue_redis, ids))

    jobs = {label: fetch(job_id, queue_redis) for label, job_id in ids.items()}
    observed = {
        label: {
            "status": job.get_status(refresh=False),
            "return_value": job.return_value(),
            "meta": contract_meta(job),
            "runs": runs(spec[label]["args"][0]) if label != "succeeds" else None,
            "results": [(r.type.name, r.worker_name) for r in job.results()],
        }
        for label, job in jobs.items()
    }
    name = worker.name
    assert observed == {
        "succeeds": {
            "status": "finished",
            "return_value": 5,
            "runs": None,
            "results": [("SUCCESSFUL", name)],
            "meta": {"queue": "default", "attempt": 1, "attempts_allowed": 5},
        },
        "fails_once": {
            "status": "finished",
            "return_value": 2,
            "runs": 2,
            "results": [("SUCCESSFUL", name), ("RETRIED", name)],
            "meta": {"queue": "default", "attempt": 2, "attempts_allowed": 5},
        },
        "always_fails": {
            "status": "failed",
            "return_value": None,
            "runs": 2,
            "results": [("FAILED", name), ("RETRIED", name)],
            "meta": {"queue": "default", "attempt": 2, "attempts_allowed": 2},
        },
        "delayed": {
            "status": "finished",
            "return_value": 1,
            "runs": 1,
            "results": [("SUCCESSFUL", name)],
            "meta": {"queue": "default", "attempt": 1, "attempts_allowed": 5},
        },
    }, f"jobs {who} ended differently from the contract"

    dead = jobs["always_fails"]
    assert contract_meta(dead, DEAD_META) == {
        "dead": "exhausted",
        "attempts_made": 2,
        "attempts_allowed": 2,
        "exc_type": "RuntimeError",
        "exc_message": "run 2 fails on purpose",
        "deaths": 1,
    }, f"dead-letter meta of a job {who}"
    assert failed.get_job_ids() == [ids["always_fails"]], f"failed registry after jobs {who}"
    rows = list(
        DeadLetter.objects.values(
            "job_id",
            "queue",
            "func_path",
            "args",
            "kwargs",
            "exc_type",
            "exc_message",
            "attempts_made",
            "attempts_allowed",
            "reason",
            "status",
            "times_dead",
            "worker",
        )
    )
    assert rows == [
        {
            "job_id": ids["always_fails"],
            "queue": "default",
            "func_path": "tests.jobs.lifecycle.count_runs",
            "args": [str(tmp_path / "always_fails.runs")],
            "kwargs": {"fail_times": 99},
            "exc_type": "RuntimeError",
            "exc_message": "run 2 fails on purpose",
            "attempts_made": 2,
            "attempts_allowed": 2,
            "reason": "exhausted",
            "status": "open",
            "times_dead": 1,
            "worker": name,
        }
    ], f"DeadLetter rows after a job {who} died"
    assert worker.stop() == 0, f"the {reader} worker did not stop cleanly on SIGTERM\n{tail(worker)}"


# --- c: a hand-over half-way through a job's life ----------------------------------------------

HANDOVER = [("old", "new"), ("new", "old")]
HANDOVER_IDS = ["old-to-new", "new-to-old-rollback"]


@pytest.mark.parametrize("first_second", HANDOVER, ids=HANDOVER_IDS)
@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_retry_scheduled_by_a_stopped_worker_of_one_release_is_finished_by_the_other(
    first_second, releases, enqueue_with, run_worker, queue_redis, tmp_path
):
    first, second = (getattr(releases, side) for side in first_second)
    path = str(tmp_path / "fails_once.runs")
    ids = enqueue_with(
        first,
        {
            "job": {
                "queue": "default",
                "func": "tests.jobs.lifecycle.count_runs",
                "args": [path],
                "kwargs": {"fail_times": 1},
            }
        },
    )
    job_id = ids["job"]
    scheduled = ScheduledJobRegistry("default", connection=queue_redis)
    leaving = run_worker(first, "default", "--without-scheduler")  # the retry must wait for the next release
    wait(
        lambda: job_id in scheduled and fetch(job_id, queue_redis).meta.get("attempt") == 2,
        f"the {first} worker to schedule attempt 2",
        leaving,
        context=lambda: describe(queue_redis, ids),
    )
    assert leaving.stop() == 0, f"the {first} worker did not stop cleanly on SIGTERM\n{tail(leaving)}"

    waiting = fetch(job_id, queue_redis)
    assert (waiting.get_status(refresh=False), contract_meta(waiting), runs(path)) == (
        "scheduled",
        {"queue": "default", "attempt": 2, "attempts_allowed": 5},
        1,
    ), f"the retry the {first} left behind"

    arriving = run_worker(second, "default")
    wait(
        lambda: status(job_id, queue_redis) == JobStatus.FINISHED,
        f"a {second} worker to run the retry the {first} scheduled",
        arriving,
        context=lambda: describe(queue_redis, ids),
    )
    job = fetch(job_id, queue_redis)
    assert {
        "return_value": job.return_value(),
        "runs": runs(path),
        "meta": contract_meta(job),
        "results": [(r.type.name, r.worker_name) for r in job.results()],
    } == {
        "return_value": 2,
        "runs": 2,
        "meta": {"queue": "default", "attempt": 2, "attempts_allowed": 5},
        "results": [("SUCCESSFUL", arriving.name), ("RETRIED", leaving.name)],
    }, f"a retry scheduled by the {first} and run by the {second}"


@pytest.mark.parametrize("first_second", HANDOVER, ids=HANDOVER_IDS)
def test_the_job_of_a_killed_worker_of_one_release_is_run_again_by_a_worker_of_the_other(
    first_second, releases, enqueue_with, run_worker, queue_redis, tmp_path
):
    """The survivor finds the job through the abandoned-job scan: it must read the dead worker's
    execution entry and liveness key as the other release wrote them."""
    from queues.models import DeadLetter

    first, second = (getattr(releases, side) for side in first_second)
    log = tmp_path / "runs.jsonl"
    # Without a scheduler: the survivor's scheduler holds the lock (a killed holder's lapses only later).
    doomed = run_worker(first, "default", "--without-scheduler")
    ids = enqueue_with(
        first,
        {
            "job": {
                "queue": "default",
                "func": "tests.jobs.resilience.logged_sleep",
                "args": [str(log)],
                "kwargs": {"first_run_seconds": 600},
            }
        },
    )
    job_id = ids["job"]
    wait(lambda: starts(log), f"the {first} worker to start the job", doomed)
    survivor = run_worker(second, "default")

    doomed.signal(signal.SIGKILL)
    assert doomed.wait(10) == -signal.SIGKILL

    wait(
        lambda: ends(log) and status(job_id, queue_redis) == JobStatus.FINISHED,
        f"a {second} worker to re-run the job of the killed {first} worker",
        survivor,
        doomed,
        context=lambda: describe(queue_redis, ids),
    )
    job = fetch(job_id, queue_redis)
    first_run, second_run = (starts(log) + [None, None])[:2]
    assert {
        "attempts": [r["attempt"] for r in starts(log)],
        "ends": len(ends(log)),
        "return_value": job.return_value(),
        "worker": job.worker_name,
        "meta": contract_meta(job),
        "started_registry": StartedJobRegistry("default", connection=queue_redis).get_job_ids(cleanup=False),
        "dead_letters": DeadLetter.objects.filter(job_id=job_id).count(),
    } == {
        "attempts": [1, 2],
        "ends": 1,
        "return_value": "done",
        "worker": survivor.name,
        "meta": {"queue": "default", "attempt": 2, "attempts_allowed": 5},
        "started_registry": [],
        "dead_letters": 0,
    }, f"the job of a {first} worker killed with SIGKILL, recovered by a {second} worker"
    assert second_run["pid"] != first_run["pid"], f"the re-run of a job of the killed {first} worker ran in its horse"
    # The same scans drop a dead worker from rq's registry when it carries the liveness mark.
    wait(
        lambda: doomed.name not in {w.name for w in Worker.all(connection=queue_redis)},
        f"the killed {first} worker to leave rq's worker registry (a {second} scan reads its liveness mark)",
        survivor,
    )
    with pytest.raises(ProcessLookupError):
        os.kill(first_run["pid"], 0)  # the killed worker's work horse died with it


# --- d: both releases on one queue ---------------------------------------------------------------


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_workers_of_both_releases_on_one_queue_run_each_job_exactly_once(
    releases, enqueue_with, run_worker, queue_redis, tmp_path
):
    """Two gate jobs hold one worker of each release (a worker runs one job at a time) while both
    scan for abandoned jobs for a few rounds: neither may take the other release's live worker for
    dead (its job would run twice). Then a batch enqueued by both releases is released to both."""
    gate_log, log, release_file = tmp_path / "gates.jsonl", tmp_path / "batch.jsonl", tmp_path / "go"
    old = run_worker(releases.old, "default")
    new = run_worker(releases.new, "default")
    both_up = time.monotonic()
    gate = {
        "queue": "default",
        "func": "tests.jobs.resilience.wait_for_file_then_return",
        "args": [str(gate_log), str(release_file)],
    }
    gates = enqueue_with(releases.new, {"gate-1": gate, "gate-2": gate})
    wait(
        lambda: len(starts(gate_log)) == 2,
        "each worker to hold a gate job",
        old,
        new,
        context=lambda: describe(queue_redis, gates),
    )
    assert {fetch(job_id, queue_redis).worker_name for job_id in gates.values()} == {old.name, new.name}, (
        f"each release's worker should hold one gate job\n{describe(queue_redis, gates)}"
    )

    batch = enqueue_with(
        releases.old,
        {
            f"old-{n}": {"queue": "default", "func": "tests.jobs.resilience.quick", "args": [str(log), n]}
            for n in range(20)
        },
    )
    batch.update(
        enqueue_with(
            releases.new,
            {
                f"new-{n}": {"queue": "default", "func": "tests.jobs.resilience.quick", "args": [str(log), n]}
                for n in range(20, 40)
            },
        )
    )
    # A wait, not an assertion: every worker's lifeline scans only after LIVENESS_TTL + LIVENESS_INTERVAL
    # seconds of healthy Redis; give each a few scans of the other release's busy worker.
    scans_done_at = both_up + LIVENESS_TTL + LIVENESS_INTERVAL + 4 * ABANDONED_SCAN
    wait(lambda: time.monotonic() >= scans_done_at, "a few abandoned-job scans", timeout=60)
    # Neither release's scans took the other's running job for stale: had one dropped its started entry, the
    # job would never run again if its worker died now (queues/jobs/execution.py: RQ_EXECUTION_RECORDS).
    running = StartedJobRegistry("default", connection=queue_redis).get_job_ids(cleanup=False)
    assert sorted(running) == sorted(gates.values()), f"started entries after the scans\n{describe(queue_redis, gates)}"
    release_file.touch()

    every = {**gates, **batch}
    wait(
        lambda: all(status(job_id, queue_redis) == JobStatus.FINISHED for job_id in every.values()),
        "every job of the batch to finish",
        old,
        new,
        context=lambda: describe(queue_redis, every),
    )

    jobs = {label: fetch(job_id, queue_redis) for label, job_id in every.items()}
    ran_by = Counter(job.worker_name for job in jobs.values())
    odd = {label: every[label] for label, job in jobs.items() if job.meta.get("attempt") != 1}
    detail = (
        f"old worker {old.name} ran {ran_by[old.name]}, new worker {new.name} ran {ran_by[new.name]}; "
        f"jobs past their first attempt:\n{describe(queue_redis, odd) or '  none'}"
    )
    assert (len(starts(gate_log)), len(ends(gate_log))) == (2, 2), f"a gate job ran twice\n{detail}"
    assert Counter(r["n"] for r in starts(log)) == Counter(range(40)), f"batch starts per job\n{detail}"
    assert Counter(r["n"] for r in ends(log)) == Counter(range(40)), f"batch ends per job\n{detail}"
    assert {label: (job.return_value(), contract_meta(job)["attempt"]) for label, job in jobs.items()} == {
        **{label: ("done", 1) for label in gates},
        **{label: (int(label.split("-")[1]), 1) for label in batch},
    }, f"return values and attempts\n{detail}"
    assert set(ran_by) <= {old.name, new.name}, f"jobs ran on unknown workers\n{detail}"
    assert (old.stop(), new.stop()) == (0, 0), f"SIGTERM exit codes\n{tail(old)}\n{tail(new)}"


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_check_w063_names_the_job_a_worker_of_a_release_up_to_6f24d7d_runs_while_rq_s_records_are_off(
    releases, tmp_path_factory, enqueue_with, run_worker, queue_redis, tmp_path, settings
):
    """This release writes no rq execution hash by default; a worker of a release up to 6f24d7d (a8814b4 here)
    needs it to tell this release's running jobs from abandoned ones. While such a worker runs a job, the
    system check queues.W063 names it (with the option False: the default), and not the job a worker of the
    last release or of this one runs; with the option True it says nothing."""
    records = Release(f"release {RECORDS_COMMIT}", extracted(tmp_path_factory, RECORDS_COMMIT))
    gate_log, release_file = tmp_path / "gates.jsonl", tmp_path / "go"
    workers = [run_worker(release, "default") for release in (records, releases.old, releases.new)]
    gate = {
        "queue": "default",
        "func": "tests.jobs.resilience.wait_for_file_then_return",
        "args": [str(gate_log), str(release_file)],
    }
    gates = enqueue_with(releases.new, {f"gate-{n}": gate for n in range(3)})
    wait(lambda: len(starts(gate_log)) == 3, "each worker to hold a gate job", *workers)
    by_worker = {fetch(job_id, queue_redis).worker_name: job_id for job_id in gates.values()}
    assert sorted(by_worker) == sorted(w.name for w in workers), describe(queue_redis, gates)
    earlier = by_worker[workers[0].name]

    try:
        found = w063(settings)
        assert len(found) == 1, found
        assert "a release up to 6f24d7d" in found[0].msg and f"1 job(s), e.g. {earlier}" in found[0].msg, found[0].msg
        assert "QUEUE_RQ_EXECUTION_RECORDS=1" in found[0].hint
        assert w063(settings, records_on=True) == []
    finally:
        release_file.touch()
    wait(lambda: len(ends(gate_log)) == 3, "the gate jobs to end", *workers)
    assert w063(settings) == []  # no job of that release runs any more
    assert [w.stop() for w in workers] == [0, 0, 0], "\n".join(tail(w) for w in workers)
