"""Failure fingerprints: which dead letters are "the same failure".

A fingerprint is a pure function of the job's function path, its exception class and its message
with what varies between two deaths of the same bug normalised away, in this order (earlier rules
win, so a UUID is not also read as numbers):

    URL (scheme://...)            -> <url>
    UUID (8-4-4-4-12 hex)         -> <uuid>
    0x... and hex ids of >= 8 hex digits with at least one digit -> <hex>
    e-mail addresses              -> <email>
    any other run of digits       -> <n>      (ids, counts, ports, durations, HTTP statuses too)
    runs of whitespace            -> one space

    >>> pattern("Order 1234 of cabinet 7f3a9c2e11 failed: GET https://x.test/o/1234 took 3.5 s")
    'Order <n> of cabinet <hex> failed: GET <url> took <n>.<n> s'

A group's title for people (``title``) says what happened in words, not "-: Job stopped by user…" for
a job an operator stopped (rq's message, with no exception class).

Only the first ``MESSAGE_LIMIT`` characters of a message count: a bounded cost per death, and two
messages that differ only past that point are the same failure anyway.
"""

import hashlib
import re

MESSAGE_LIMIT = 1000  # characters of the message that are normalised and hashed
PATTERN_LIMIT = 500  # characters of the normalised message kept on the group (display only)

_RULES = [
    (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'\"<>)\]}]+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (re.compile(r"\b0[xX][0-9a-fA-F]+\b"), "<hex>"),
    (
        re.compile(r"(?<![0-9a-zA-Z])(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}(?![0-9a-zA-Z])"),
        "<hex>",
    ),
    (re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"), "<email>"),
    (re.compile(r"\d+"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def pattern(message):
    """``message`` with ids, numbers, UUIDs, hex ids, e-mails and URLs replaced by placeholders
    (see the module docstring); '' for None."""
    text = (message or "")[:MESSAGE_LIMIT]
    for regex, placeholder in _RULES:
        text = regex.sub(placeholder, text)
    return text.strip()


def fingerprint(func_path, exc_type, message):
    """The fingerprint of a failure: 32 hex characters (SHA-256 of function path, exception class
    and ``pattern(message)``). Equal for two deaths of the same function with the same exception
    whose messages differ only in what ``pattern`` normalises away."""
    key = "\n".join([func_path or "", exc_type or "", pattern(message)])
    return hashlib.sha256(key.encode("utf-8", "backslashreplace")).hexdigest()[:32]


# rq's message of a job stopped from the panel or ``send_stop_job_command`` (queues/worker/settle.py
# STOPPED_BY_USER): "Job stopped by user, work-horse terminated."; no exception class comes with it.
_STOPPED = re.compile(r"^Job stopped by user\b")
TITLE_LIMIT = 80  # characters of the pattern in a title


def title(exc_type, pattern_text):
    """A failure group's title: "Stopped by an operator" for a stopped job, else the exception's class
    name and the group's pattern ("TimeoutError: GET <url> took <n> s"), "(no exception)" without one."""
    text = " ".join((pattern_text or "").split())
    if not exc_type and _STOPPED.match(text):
        return "Stopped by an operator"
    name = (exc_type or "").rsplit(".", 1)[-1] or "(no exception)"
    if len(text) > TITLE_LIMIT:
        text = text[: TITLE_LIMIT - 1] + "…"
    return f"{name}: {text}" if text else name
