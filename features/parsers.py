"""The feature API's JSON parser: every body it cannot take is a ``ParseError`` (400), never a 500.

DRF's ``JSONParser`` lets through what later breaks the view or the renderer: a number beyond a
float (``1e400`` parses as ``inf``, which no JSON answer can echo), a lone surrogate (``"\\ud800"``
is not Unicode: the database and the UTF-8 answer refuse it), nesting deep enough to exhaust the
recursion limit (``RecursionError`` is not a ``ValueError``). Each is refused here with a message naming what was wrong.
"""

import json
import math

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser, get_encoding


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range (beyond a 64-bit float)")
    return value


def _refuse_constant(name):
    raise ValueError(f"{name} is not valid JSON")


def lone_surrogate_path(data):
    """Where a string (key or value) holds a lone surrogate, as ``prompt`` / ``items[2]``; else None.

    Iterative: the parsed body may be nested as deep as the parser allowed.
    """
    stack = [(data, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if not _is_unicode(value):
                return path or "(body)"
        elif isinstance(value, dict):
            for key, item in value.items():
                name = f"{path}.{key}" if path else str(key)
                if not _is_unicode(key):
                    return path or "(body)"
                stack.append((item, name))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))
    return None


def _is_unicode(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class SafeJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        charset = get_encoding(parser_context or {})  # refuses non-text codecs (bz2_codec...) with a 400
        try:
            text = stream.read().decode(charset)
        except UnicodeDecodeError as exc:
            raise ParseError(
                f"JSON parse error - the body is not valid {charset}: {exc.reason} at byte {exc.start}."
            ) from None
        try:
            data = json.loads(text, parse_float=_finite_float, parse_constant=_refuse_constant)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        where = lone_surrogate_path(data)
        if where is not None:
            raise ParseError(
                f"JSON parse error - a string at {where} holds a lone surrogate (an unpaired \\ud800-\\udfff "
                "escape), which is not Unicode text."
            )
        return data
