"""Log lines that a request cannot forge: control characters in logged values are escaped.

A queue name, job id or user name comes from the request; logged raw, ``pause/x%0A<forged line>/``
writes a second, forged line. ``escape`` turns every control character (C0 and C1 controls, DEL,
Unicode line/paragraph separators and format characters such as the bidi overrides) into a
visible ``\\n``, ``\\x1b``, ``\\u2028`` escape, and a backslash into ``\\\\`` so an escape cannot be
faked either (the convention of Django's own ``django.request`` log since 5.2.2).

``EscapeControlCharacters`` is a logging filter applying it to a record's whole message; the
loggers of the queue panel, the audit trail and the sign-in throttle install it
(``get_logger``), so no call site has to remember. It can also go on a handler in
``settings.LOGGING`` (``{"()": "queues.logsafe.EscapeControlCharacters"}``) to cover every logger.

A leaf module: it imports nothing from ``queues``.
"""
import logging
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


class EscapeControlCharacters(logging.Filter):
    """Escape control characters in the formatted message of every record (never drops one).

    The traceback of ``exc_info`` is left alone: the formatter adds it after the message, and its
    line breaks are real.
    """

    def filter(self, record):
        message = record.getMessage()
        escaped = escape(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


_FILTER = EscapeControlCharacters()


def get_logger(name):
    """``logging.getLogger(name)`` with ``EscapeControlCharacters`` installed (once)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, EscapeControlCharacters) for f in logger.filters):
        logger.addFilter(_FILTER)
    return logger
