"""Recording a job's start and outcome through a Redis outage, in the process that runs the job.

rq 3.0's horse lets a Redis error while recording a success fall into its failure path (a job that
succeeded during an outage was recorded as failed), and dies on a SIGTERM sent to every process of
the service. Here the process running the job retries recording its start, success or failure:

- in a work horse (forking worker) for up to ``OUTCOME_WAIT_SECONDS``; past that it exits with
  EX_TEMPFAIL without recording anything, and its worker puts the job back (``supervision.py``);
- in a fork-free worker until Redis is back, or until the worker is asked to stop: then the worker
  exits with the job still registered as started, and the other workers re-run it (at least once).

The horse ignores SIGTERM (its worker decides when the job stops) and dies with its worker.
"""

import os
import signal

from rq.job import JobStatus

from queues.connection.outage import REDIS_ERRORS, Backoff, OutageLog, retry_while_unavailable
from queues.jobs import resume
from queues.worker.kernel import die_with_parent

EX_TEMPFAIL = getattr(os, "EX_TEMPFAIL", 75)  # the horse could not record its job's outcome


class OutcomeNotRecorded(SystemExit):
    """A fork-free worker asked to stop while Redis is away: leave now, the job stays started."""


def _ignore_signal(signum, frame):
    """SIGTERM in the work horse: the worker decides when the job stops (a handler, not SIG_IGN, so
    that programs the job starts get the default disposition back). A long job pauses at its next
    checkpoint (``queues/jobs/resume.py``): the stop is noted, nothing else (no lock, no I/O)."""
    resume.note_stop()


def become_horse(worker_pid):
    """Signals of a freshly forked work horse (after rq's own setup)."""
    signal.signal(signal.SIGTERM, _ignore_signal)
    die_with_parent(worker_pid)


def record(func, doing, *, options, log, who, in_horse, should_stop=None):
    """``func()`` retried through a Redis outage; its value. See the module docstring for when
    it gives up and what happens then."""
    outage = OutageLog(log, who)
    backoff = Backoff(options.redis_retry_max)
    try:
        return retry_while_unavailable(
            func,
            backoff,
            outage,
            doing=doing,
            give_up_after=options.outcome_wait if in_horse else None,
            should_stop=None if in_horse else should_stop,
        )
    except REDIS_ERRORS:
        if in_horse:
            log.error(
                "%s: could not %s for %g s; the job goes back to its queue and may run again",
                who,
                doing,
                options.outcome_wait,
            )
            os._exit(EX_TEMPFAIL)
        log.error(
            "%s: could not %s and the worker is stopping; the job stays registered as started and "
            "another worker will run it again",
            who,
            doing,
        )
        raise OutcomeNotRecorded(0) from None


def record_for(worker, func, doing):
    """``record`` in ``worker``'s job process: its work horse, or the fork-free worker itself."""
    in_horse = worker.is_horse
    who = f"Work horse of worker {worker.name}" if in_horse else f"Worker {worker.name}"
    return record(
        func,
        doing,
        options=worker.resilience,
        log=worker.log,
        who=who,
        in_horse=in_horse,
        should_stop=lambda: worker.stop.requested,
    )


def success_recorder(record_success, job):
    """``record_success()`` made idempotent under retry: a Redis error after the success itself was
    written (only what follows it failed) is not retried."""

    def attempt():
        try:
            return record_success()
        except REDIS_ERRORS:
            if job.connection.hget(job.key, "status") == JobStatus.FINISHED.value.encode():
                return None
            raise

    return attempt
