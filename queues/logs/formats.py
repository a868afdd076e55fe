"""The log format: ``plain`` lines for a terminal, or ``json`` (one object a line) for log shippers.

``settings.QUEUES_LOG_FORMAT`` (``OPTIMA_LOG_FORMAT`` in the environment of this project's settings)
chooses the formatter of the console handler in ``settings.LOGGING``; another project puts
``{"()": "queues.logs.formats.JsonFormatter"}`` in its own ``LOGGING``. A value other than ``plain`` or
``json`` is system check ``queues.E120`` (the settings fall back to ``plain`` meanwhile).

A JSON line holds ``time`` (UTC, ISO 8601, milliseconds), ``level``, ``logger``, ``message``,
``process``, ``exc_info`` (the traceback, when the record has one) and the record's own scalar
attributes: the job outcome lines' ``job_id``, ``queue``, ``func``, ``attempt``, ``duration`` and
``outcome`` (``outcome.py``), Django's ``status_code``... Standard library only. Non-ASCII text is
written as it is, except the characters a Unicode-aware line splitter breaks at (``LINE_BREAKS``:
U+2028, U+2029, U+0085...), escaped: a value can never cut a record in two.
"""

import datetime as dt
import json
import logging

from django.conf import settings

from queues.conf import Problem

FORMATS = ("plain", "json")
DEFAULT = "plain"

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
_SKIPPED = {"control_characters_escaped"}  # logsafe's marker
# Characters ``json.dumps(ensure_ascii=False)`` writes raw that a Unicode-aware line splitter (Python's
# ``str.splitlines``, some shippers) breaks a line at: written as ``\uXXXX`` escapes, so one record stays
# one line. (json escapes the C0 ones, U+000B U+000C U+001C-U+001E, itself: listed for completeness.)
LINE_BREAKS = "\u2028\u2029\u0085\u000b\u000c\u001c\u001d\u001e"
_ESCAPE_BREAKS = str.maketrans({c: f"\\u{ord(c):04x}" for c in LINE_BREAKS})


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback is a string inside it)."""

    def format(self, record):
        entry = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for key, value in vars(record).items():
            if key in _STANDARD or key in _SKIPPED or key in entry:
                continue
            if value is None or isinstance(value, (str, int, float, bool)):
                entry[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc_info"] = record.exc_text
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str).translate(_ESCAPE_BREAKS)


def chosen(value):
    """The formatter name ``settings.LOGGING`` uses for ``value`` (``plain`` for a bad one: E120 says so)."""
    return value if value in FORMATS else DEFAULT


def validate():
    """queues.E120: ``QUEUES_LOG_FORMAT`` is not ``plain`` or ``json``."""

    value = getattr(settings, "QUEUES_LOG_FORMAT", DEFAULT)
    if value in FORMATS:
        return []
    return [
        Problem(
            "queues.E120",
            f"QUEUES_LOG_FORMAT must be 'plain' or 'json', got {value!r}; the logs are written as 'plain' meanwhile.",
            "Set OPTIMA_LOG_FORMAT=json (one JSON object a line, for log shippers) or plain (the default), "
            "or QUEUES_LOG_FORMAT in the settings.",
        )
    ]
