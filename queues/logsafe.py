"""Log lines that a request cannot forge: control characters in logged values are escaped.

A queue name, job id or user name comes from the request; logged raw, ``pause/x%0A<forged line>/``
writes a second, forged line. ``escape`` turns every control character (C0 and C1 controls, DEL,
Unicode line/paragraph separators and format characters such as the bidi overrides) into a
visible ``\\n``, ``\\x1b``, ``\\u2028`` escape, and a backslash into ``\\\\`` so an escape cannot be
faked either (the convention of Django's own ``django.request`` log since 5.2.2).

``EscapeControlCharacters`` is a logging filter applying it to a record's whole message and to its
traceback, keeping a traceback's own lines (``escape_message``: its frames are the code's, but an
exception's message may carry a job id); the loggers of the queue panel, the audit
trail and the sign-in throttle install it (``get_logger``), so no call site has to remember. It
can also go on a handler in ``settings.LOGGING`` (``{"()": "queues.logsafe.EscapeControlCharacters"}``).

The worker processes (``rqworker``, ``rqworker-pool``, ``rqscheduler``, and what they fork: work
horses, RQ's scheduler, pool members) log job ids, queue entries and key names read from Redis,
through this app's loggers and rq's own (``rq.worker``, ``rq.job``, ``rq.queue``, ``rq.scheduler``,
``rq_scheduler``...). ``install`` applies the filter to every record of those logger families when
it is created: a filter set on a logger does not see the records of its child loggers, nor of
loggers created later.

A leaf module: it imports nothing from ``queues``.
"""

import logging
import re
import traceback
import unicodedata

_UNSAFE_CATEGORIES = {"Cc", "Cf", "Zl", "Zp"}


def _escape_char(char):
    if char == "\\":
        return "\\\\"
    if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(char)
    if named:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def escape(value):
    """``str(value)`` with control characters and backslashes escaped: always one printable line."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_escape_char(c) for c in text)


_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(: |:?$)")  # "pkg.Error: message", as Python writes it


def escape_message(text):
    """``escape(text)``, except that a Python traceback inside ``text`` (rq writes some into its
    messages) keeps its own lines: the header, the indented frames, the ``Type: message`` line right
    after them, blank lines and the chaining sentences. Every other line break is escaped, so no
    line starts with text a value chose (a log line starts with its time: never an exception's name)."""
    if _TRACEBACK not in text:
        return escape(text)
    lines = text.split("\n")
    kept = [escape(lines[0])]  # the message's first line: the formatter puts the record's time before it
    after = "traceback" if lines[0] == _TRACEBACK else "start"
    for line in lines[1:]:
        if line == _TRACEBACK or line in _CHAINED or not line:
            after = "traceback" if line == _TRACEBACK else "break"
        elif line.startswith(" ") and after in ("traceback", "frame"):
            after = "frame"
        elif after == "frame" and _EXCEPTION_LINE.match(line):
            after = "exception"
        else:
            kept[-1] += "\\n" + escape(line)
            continue
        kept.append(escape(line))
    return "\n".join(kept)


def format_exception(exc_info):
    """The traceback ``logging.Formatter.formatException`` writes, with ``escape_message``'s rule: its
    lines stay, a line break inside an exception's message is escaped."""
    return escape_message("".join(traceback.format_exception(*exc_info)).rstrip("\n"))


ESCAPED = "control_characters_escaped"  # set on a record once escaped: never escaped twice


class EscapeControlCharacters(logging.Filter):
    """Escape control characters in the formatted message of every record, and in the messages of
    its traceback's exceptions (never drops one)."""

    def filter(self, record):
        if getattr(record, ESCAPED, False):
            return True
        setattr(record, ESCAPED, True)
        message = record.getMessage()
        escaped = escape_message(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = format_exception(record.exc_info)
        return True


_FILTER = EscapeControlCharacters()


def get_logger(name):
    """``logging.getLogger(name)`` with ``EscapeControlCharacters`` installed (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, EscapeControlCharacters) for f in logger.filters):
        logger.addFilter(_FILTER)
    return logger


WORKER_LOGGERS = ("queues", "rq", "rq_scheduler")  # logger families of the worker processes (and their children)


def install(families=WORKER_LOGGERS):
    """Escape every record of the loggers named ``families`` or below them, in this process and
    the processes it forks, from now on (a log record factory wrapping the current one). Once per
    process; other loggers' records are left alone."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "escapes", None) is not None:
        return
    prefixes = tuple(f"{name}." for name in families)

    def factory(name, *args, **kwargs):
        record = previous(name, *args, **kwargs)
        if name in families or name.startswith(prefixes):
            try:
                _FILTER.filter(record)
            except Exception:  # noqa: BLE001 — e.g. msg % args fails: left to the handler, which reports it
                pass
        return record

    factory.escapes = families
    logging.setLogRecordFactory(factory)
