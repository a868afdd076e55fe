"""One log line per job outcome, on the logger ``queues.jobs``.

=========  =======  ==========================================================================
outcome    level    written by
=========  =======  ==========================================================================
succeeded  INFO     ``worker/attempt.py`` (``mark_succeeded``), once the success is recorded
retried    WARNING  ``failures/handler.py`` (``retry``): the error's type and message, the next
                    attempt and its delay; no traceback (rq's own line with it is at DEBUG)
dead       ERROR    ``failures/handler.py`` (``after_burial``) and ``deadletter.bury`` (a job
                    abandoned with no attempt left): with the last attempt's traceback
canceled   WARNING  ``failures/handler.py``: an operator stopped the running job (rq's stop-job
                    command); it is dead-lettered, never retried
=========  =======  ==========================================================================

Every line carries the same fields, in its text (``job <id> <outcome>: queue=... func=...
attempt=N duration=0.012s``) and as record attributes (``job_id``, ``queue``, ``func``, ``attempt``,
``duration``, ``outcome``) that the JSON format writes as keys of their own (``formats.py``).
"""

import logging

from queues.jobs import meta as jobmeta
from queues.logsafe import get_logger

logger = get_logger("queues.jobs")

SUCCEEDED, RETRIED, DEAD, CANCELED = "succeeded", "retried", "dead", "canceled"


def fields(job, outcome, duration, attempt=None):
    """The record attributes of an outcome line (read without a Redis call). ``attempt``: the attempt
    the outcome is of, when the meta counts the next one already (a retry)."""

    try:
        func = job.func_name
    except Exception:  # noqa: BLE001 — a job whose data cannot be read still gets its line
        func = "?"
    return {
        "job_id": job.id,
        "queue": jobmeta.queue_name(job),
        "func": func,
        "attempt": attempt or jobmeta.current_attempt(job),
        "duration": round(float(duration or 0.0), 6),
        "outcome": outcome,
    }


def _log(level, job, outcome, duration, detail="", trace="", attempt=None):
    if not logger.isEnabledFor(level):
        return
    extra = fields(job, outcome, duration, attempt)
    text = "job %s %s: queue=%s func=%s attempt=%d duration=%.3fs" + ("; %s" if detail else "")
    args = [extra["job_id"], outcome, extra["queue"], extra["func"], extra["attempt"], extra["duration"]]
    if detail:
        args.append(detail)
    if trace:
        text += "\n%s"
        args.append(trace.rstrip("\n"))
    logger.log(level, text, *args, extra=extra)


SUMMARY_CHARS = 500  # of an exception's message on the line; the whole is in the job's results and dead letter


def error_summary(exc_info, exc_string=""):
    """``Type: message`` of the attempt's exception (its last line of ``exc_string`` without one), at most
    ``SUMMARY_CHARS`` long."""
    if exc_info and exc_info[1] is not None:
        message = str(exc_info[1])
        text = f"{type(exc_info[1]).__name__}: {message}" if message else type(exc_info[1]).__name__
    else:
        lines = [line for line in (exc_string or "").strip().splitlines() if line.strip()]
        text = lines[-1].strip() if lines else "unknown error"
    return text if len(text) <= SUMMARY_CHARS else text[:SUMMARY_CHARS] + "…"


def succeeded(job, duration):
    _log(logging.INFO, job, SUCCEEDED, duration)


def retried(job, duration, *, attempt, delay, reason, exc_info=None, exc_string=""):
    """A failed attempt that will be retried: WARNING, no traceback (the traceback goes at DEBUG, on
    this same logger, and is kept in the job's results stream)."""
    _log(
        logging.WARNING,
        job,
        RETRIED,
        duration,
        f"{error_summary(exc_info, exc_string)}; attempt {attempt + 1} in {delay:.3g}s ({reason})",
        attempt=attempt,
    )
    if logger.isEnabledFor(logging.DEBUG) and exc_string:
        logger.debug("job %s attempt %d traceback:\n%s", job.id, attempt, exc_string.rstrip("\n"))


def dead(job, duration, *, reason, exc_info=None, exc_string=""):
    """The job reached the dead letter: ERROR, with the last attempt's traceback."""
    _log(
        logging.ERROR,
        job,
        DEAD,
        duration,
        f"{reason}: {error_summary(exc_info, exc_string)}",
        trace=exc_string if "Traceback" in (exc_string or "") else "",
    )


def canceled(job, duration):
    """An operator stopped the running job: WARNING; it is in the dead letter (reason ``stopped``)."""
    _log(logging.WARNING, job, CANCELED, duration, "stopped by an operator; in the dead letter (stopped)")
