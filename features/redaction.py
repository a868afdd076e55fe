"""What a client may see of a value it sent, or of a job's error.

``shown(value)`` is a request value as echoed in a 400: JSON-renderable whatever it was (no
``inf``, no lone surrogate), and short. ``public_error(text)`` is a job's last error as
``GET /jobs/<id>/`` shows it: the exception's class name and its message with URLs, network
addresses and secrets masked (operators read the full text in the dead-letter admin).
"""

import math
import re
import reprlib

from features import conf

LIMIT = 200  # characters of a value echoed back
ERROR_LIMIT = 500  # characters of an error shown

_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxlist, _repr.maxdict, _repr.maxstring, _repr.maxother = 3, 10, 10, 60, 60


def _text(value):
    """A str that UTF-8 can encode: lone surrogates become their ``\\udxxx`` escapes."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(value, limit=LIMIT):
    """A request value as echoed in an error: JSON-renderable, long strings and structures shortened."""
    if isinstance(value, str):
        value = _text(value)
        return value if len(value) <= limit else value[:limit] + "..."
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**50:
        return f"(an integer of {len(str(abs(value)))} digits)"
    if isinstance(value, (dict, list)):
        text = _text(_repr.repr(value))  # depth- and length-bounded, whatever the nesting
        return text if len(text) <= limit else text[:limit] + "..."
    return value


_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_ADDRESS = re.compile(
    r"\b(?:\d{1,3}(?:\.\d{1,3}){3}|localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)(?::\d{1,5})?\b"
    r"|\[[0-9A-Fa-f:]+\](?::\d{1,5})?"
)
_SECRET = re.compile(
    r"(?i)\b(password|passwd|pwd|secret|token|api[_-]?key|authorization)(['\"]?\s*[=:]\s*)"
    r"(?:bearer\s+|basic\s+)?['\"]?[^\s'\",;]+"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s?(.*))?$", re.S)


def redact(message):
    """Mask URLs, host[:port] addresses and ``password=...``-like secrets in a message."""
    token = conf.get("MARKETPLACE_TOKEN")
    if token:
        message = message.replace(token, "<secret>")
    message = _URL.sub("<url>", message)
    message = _SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}<secret>", message)
    message = _BEARER.sub(lambda m: f"{m.group(1)} <secret>", message)
    return _ADDRESS.sub(_address, message)


def _address(match):
    text = match.group(0)
    # Dotted names are addresses only when they look like hosts: a dotted Python path or a price
    # ("10.00") is left alone; an IPv4 address, localhost or a name with a port is masked.
    if re.fullmatch(r"\d+\.\d+", text):
        return text
    if ":" in text or text.startswith(("localhost", "[")) or re.match(r"\d{1,3}(?:\.\d{1,3}){3}", text):
        return "<address>"
    return text


def public_error(exc_string):
    """The last line of a job's error as a client sees it: ``ClassName: masked message``."""
    lines = [line.strip() for line in (exc_string or "").strip().splitlines() if line.strip()]
    if not lines:
        return None
    match = _EXC_LINE.match(lines[-1])
    if match and (match.group(2) is not None or "." in match.group(1)):
        name, message = match.group(1).rsplit(".", 1)[-1], match.group(2) or ""
        text = f"{name}: {redact(message)}" if message else name
    else:
        text = redact(lines[-1])
    text = _text(text)
    return text if len(text) <= ERROR_LIMIT else text[:ERROR_LIMIT] + "..."
