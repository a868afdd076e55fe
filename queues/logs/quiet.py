"""rq's own lines that ``outcome`` says once, said again at DEBUG.

rq logs each job three to six times at INFO ("<queue>: <id>" when popped, "Successfully completed
... job in ...", "<queue>: Job OK (<id>)", "result is kept for ... seconds") and each failed attempt
at ERROR with its traceback, even one that will be retried; and its registry clean-up ("cleaning
registries for queue: ...") every maintenance round. The worker writes one line per outcome
instead (``outcome.py``). Where rq has a switch it is used (``log_result_lifespan = False``,
``log_job_description=False``: ``worker/adapter.py``); for the rest, ``RqJobLines`` — a filter on
the ``rq.worker`` logger — makes those records DEBUG records: shown with ``--verbosity 2`` (or the
``rq.worker`` logger at DEBUG), dropped otherwise. Matched on the formatted text, which
``logsafe`` may have escaped already (rq colours a queue name on a terminal).
"""

import logging
import re

RQ_WORKER = "rq.worker"

# rq 3.0's wording (rq/worker/base.py); a line rq rewords is simply logged at its own level again.
DEMOTED = re.compile(
    "|".join(
        (
            r"^Successfully completed ",  # handle_job_success
            r"^Worker \S+: .*Job OK.* \(",  # _finalize_success
            r"^Worker \S+: job \S+: exception raised while executing \(",  # handle_exception (with the traceback)
            r"^Worker \S+: job \S+ result (is kept for|discarded immediately|will never expire)",  # log_result_lifespan
            r"^Worker \S+: cleaning (registries for queue: |group registries$)",  # clean_registries, each maintenance
        )
    )
)


class RqJobLines(logging.Filter):
    """Turns rq's per-job and per-maintenance INFO/ERROR records into DEBUG ones (never drops a record
    the logger is enabled for at DEBUG)."""

    def __init__(self, logger):
        super().__init__()
        self.logger = logger

    def filter(self, record):
        if record.levelno <= logging.DEBUG or record.levelno >= logging.CRITICAL:
            return True
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 — left to the handler, which reports a broken record
            return True
        if not DEMOTED.search(message):
            return True
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return self.logger.isEnabledFor(logging.DEBUG)


def install():
    """Put ``RqJobLines`` on rq's worker logger (once per process; forked horses inherit it)."""
    logger = logging.getLogger(RQ_WORKER)
    if not any(isinstance(f, RqJobLines) for f in logger.filters):
        logger.addFilter(RqJobLines(logger))
