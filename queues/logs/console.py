"""The worker's and scheduler's lines on the console when the project configured no logging for them.

A fresh project has no ``LOGGING`` for ``queues``: its root logger has no handler and Python's last resort
prints WARNING and above, so a worker said nothing of a job that succeeded (INFO on ``queues.jobs``) and
looked idle, while rq's own worker prints its lines (``rq.logutils.setup_loghandlers`` puts a handler on
``rq.worker``). ``unless_configured`` does the same for the app's loggers: a console handler (stderr, the
format of ``QUEUES_LOG_FORMAT``) at the command's level on each named logger that no handler reaches. A logger
a handler reaches already (``Logger.hasHandlers``: its own, or an ancestor's, e.g. the root handler of the
project's ``LOGGING``) is left untouched, so configured projects see no change and no line twice.
"""

import logging

from django.conf import settings

from queues.logs import formats

PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ConsoleHandler(logging.StreamHandler):
    """The handler ``unless_configured`` adds (a class of its own: found again, never added twice)."""


def unless_configured(level, names=("queues",)):
    """Give each logger of ``names`` that no handler reaches a console handler at ``level`` (a name or a
    number). Returns the names it changed."""

    changed = []
    for name in names:
        logger = logging.getLogger(name)
        if logger.hasHandlers():
            continue
        handler = ConsoleHandler()
        json_lines = getattr(settings, "QUEUES_LOG_FORMAT", formats.DEFAULT) == "json"
        handler.setFormatter(formats.JsonFormatter() if json_lines else logging.Formatter(PLAIN))
        logger.addHandler(handler)
        logger.setLevel(level)
        changed.append(name)
    return changed
