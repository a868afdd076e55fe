"""The supervision of one work horse, in-process: ``verdict`` for every case, and ``HorseWatch``
with a real child process (queues/worker/supervision.py)."""

import logging
import os
import signal

from rq.job import JobStatus

from queues.worker.horse import EX_TEMPFAIL
from queues.worker.stop import StopState
from queues.worker.supervision import Action, HorseWatch, Verdict, verdict
from tests.jobs import work

EXITED_0 = 0
EXITED_1 = 1 << 8
EXITED_TEMPFAIL = EX_TEMPFAIL << 8
KILLED = signal.SIGKILL  # wait status of a process killed by SIGKILL


def judge(status, registered=True, wait_status=EXITED_0, interrupted=None, stopped=False):
    return verdict(
        status=status, registered=registered, wait_status=wait_status, interrupted=interrupted, stopped=stopped
    )


def test_a_job_still_queued_after_its_horse_ended_goes_back_without_using_an_attempt():
    assert judge(JobStatus.QUEUED, wait_status=KILLED) == Verdict(
        Action.REQUEUE, "its work horse ended before starting it"
    )
    assert judge(JobStatus.QUEUED, interrupted="grace over") == Verdict(Action.REQUEUE, "grace over")


def test_a_job_the_worker_interrupted_goes_back_when_it_was_still_running():
    assert judge(JobStatus.STARTED, wait_status=KILLED, interrupted="grace over") == Verdict(
        Action.REQUEUE, "grace over"
    )


def test_a_job_that_ended_before_the_interruption_is_only_forgotten():
    assert judge(JobStatus.FINISHED, interrupted="grace over") == Verdict(Action.FORGET)
    assert judge(JobStatus.FINISHED, registered=False, interrupted="grace over") == Verdict(Action.NONE)


def test_a_horse_that_could_not_reach_redis_hands_its_job_back():
    assert judge(JobStatus.STARTED, wait_status=EXITED_TEMPFAIL) == Verdict(
        Action.REQUEUE, "its work horse could not reach Redis to record the outcome"
    )
    assert judge(JobStatus.STARTED, wait_status=EXITED_0) == Verdict(Action.REQUEUE, "its outcome was not recorded")
    assert judge(JobStatus.STARTED, wait_status=None) == Verdict(Action.REQUEUE, "its outcome was not recorded")


def test_a_killed_horse_fails_its_attempt_and_a_stopped_job_is_stopped():
    failed = judge(JobStatus.STARTED, wait_status=KILLED)
    assert failed.action is Action.FAIL
    assert failed.why == "Work-horse terminated unexpectedly; waitpid returned 9 (signal 9); "
    assert judge(JobStatus.STARTED, wait_status=EXITED_1, stopped=True) == Verdict(Action.STOPPED)


def test_a_recorded_outcome_needs_nothing_more():
    assert judge(JobStatus.FINISHED, registered=False) == Verdict(Action.NONE)
    assert judge(JobStatus.FAILED, registered=False, wait_status=EXITED_1) == Verdict(Action.NONE)


def _child(seconds):
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        work(seconds)  # the child's life: a horse that lasts ``seconds``
        os._exit(0)
    return pid


def _watch(pid, stop, calls, timeout=0):
    def kill():
        calls.append("kill")
        os.kill(pid, signal.SIGKILL)

    return HorseWatch(
        pid,
        stop=stop,
        kill=kill,
        beat=lambda: calls.append("beat"),
        tick=lambda: calls.append("tick"),
        beat_interval=0.3,
        job_timeout=timeout,
        log=logging.getLogger("test"),
        worker_name="w",
        job_id="j",
    )


def test_the_watch_returns_the_exit_of_a_horse_that_finished_and_beats_meanwhile():
    calls = []
    pid, status, _ = _watch(_child(1.0), StopState(25), calls).wait(poll=0.2)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert "beat" in calls and "kill" not in calls


def test_the_watch_kills_the_horse_when_the_grace_period_of_a_stop_runs_out():
    stop = StopState(0.5)
    stop.request(running=True)
    calls = []
    # the child would sleep 30 s and exit 0: ended by SIGKILL proves the watch killed it (no timing asserted)
    pid, status, _ = _watch(_child(30), stop, calls).wait(poll=0.1)
    assert calls.count("kill") == 1
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert stop.interrupted == "the shutdown grace period of 0.5 s ran out"
