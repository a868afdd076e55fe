"""An index entry checked against its job: the index says where to look, the job's hash says what it is.

Whoever can write to the queues' Redis can ZADD any id to any set of the index: another owner's job
(or an ownerless one, which only staff may see) to ``search:owner:<o>``, a job of one function to
another's ``search:func:<f>``, a job of one queue to another's ``search:queue:<q>``. A search
therefore never trusts the set it reads: each candidate's own ``meta["owner"]``, function (the first
item of rq's ``data``) and ``origin`` are compared with what the set claims BEFORE the job is shown or
its text matched (``belongs``). One that does not match, or cannot be read well enough to tell, is
"misplaced": left out of the page and ZREM'd from the set it was read from (``drop``), with one
WARNING per set and search naming the ids and why (a set stuffed with 5,000 planted ids costs one
line per search, not 5,000). The job itself is left alone: it is still listed, under its own owner,
function and queue, and rq's own lists and registries (the panel's queue pages) still show it.

An owner is compared as text (``search:owner:<o>`` is keyed by ``str(owner)``): user 7's jobs carry
``7``, and ``search_jobs(owner="7")`` finds them as ``owner=7`` does; an owner that is neither a
number nor a text (a list, ``true``, a missing ``meta``) matches no owner's set.
"""

import json
import re

from queues import logsafe
from queues.keyspace import entries

logger = logsafe.get_logger("queues.resilience")

SHOWN_IDS = 10  # ids named in one WARNING; the rest counted
_FUNC = re.compile(rb'\s*\[\s*"((?:[^"\\]|\\.){1,1000})"')  # rq's payload opens with the function's path


def owner_text(value):
    """``meta["owner"]`` as the index keys it (``str``), or None when it names no owner."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    return str(value)


def meta_owner(raw_meta):
    """(owner as text or None, why it cannot be read or None) from the ``meta`` field of a job hash."""
    if not raw_meta:
        return None, None
    try:
        meta = json.loads(raw_meta)
    except ValueError:  # not JSON (UnicodeDecodeError is one)
        return None, "its meta is not JSON"
    if not isinstance(meta, dict):
        return None, "its meta is not a JSON object"
    return owner_text(meta.get("owner")), None


def function_of(decoded, data):
    """The job's function path: from the decoded payload, else (a payload too large to decode whole)
    from the opening of ``data``, which rq writes as ``["<function>", ...``; None when unreadable."""
    if decoded is not None:
        return decoded[0] if isinstance(decoded[0], str) else None
    if not data:
        return None
    try:
        opening, _whole = entries.inflate(data, 2048)
    except Exception:  # noqa: BLE001 — zlib.error, or not bytes: no function to read
        return None
    return function_at(opening)


def function_at(opening):
    """The function path rq's ``data`` opens with (``["<function>", ...``), read from the inflated bytes
    ``opening`` without parsing the rest; None when it does not open so. Wherever it finds one, it is
    ``function_of``'s answer too (the payload's first item, however the rest parses)."""
    match = _FUNC.match(opening)
    if match is None:
        return None
    try:
        name = json.loads(b'"' + match.group(1) + b'"')
    except ValueError:
        return None
    return name if isinstance(name, str) else None


def belongs(criterion, wanted, queue, function, owner, owner_unreadable=None):
    """Why a job does not belong in the set of ``criterion`` (owner, function or queue) = ``wanted``,
    or None when it does. ``queue``, ``function``, ``owner``: the job's own (None when unknown);
    ``owner_unreadable``: why its meta cannot be read (then no owner's set holds it)."""
    if criterion == "owner":
        if owner_unreadable:
            return owner_unreadable
        wanted = owner_text(wanted)
        if owner is None:
            return f"it has no owner, not {wanted}"
        return None if owner == wanted else f"its owner is {owner}, not {wanted}"
    if criterion == "function":
        if function is None:
            return "its function cannot be read"
        return None if function == wanted else f"its function is {function}, not {wanted}"
    if criterion == "queue":
        return None if queue == wanted else f"its queue is {queue or 'unknown'}, not {wanted}"
    return None


def drop(connection, misplaced, gone=None):
    """ZREM the ``misplaced`` entries ({index key: [(member as stored, job id, why)]}) from their sets, and
    say so: one WARNING per set; and the ``gone`` ones ({index key: [member as stored]}: their job expired),
    quietly. One pipeline for both. Returns the number of entries removed."""
    if not misplaced and not gone:
        return 0
    with connection.pipeline(transaction=False) as pipe:
        for key, members in (gone or {}).items():
            pipe.zrem(key, *members)
        for key, found in misplaced.items():
            pipe.zrem(key, *[member for member, _job_id, _why in found])
        replies = pipe.execute(raise_on_error=False)
    for key, found in misplaced.items():
        named = "; ".join(f"{job_id} ({why})" for _member, job_id, why in found[:SHOWN_IDS])
        more = f"; and {len(found) - SHOWN_IDS} more" if len(found) > SHOWN_IDS else ""
        logger.warning(
            "search index %s: %d %s not belong there, dropped from it (the job is left alone): %s%s",
            key,
            len(found),
            "entry does" if len(found) == 1 else "entries do",
            named,
            more,
        )
    return sum(r for r in replies if isinstance(r, int))
