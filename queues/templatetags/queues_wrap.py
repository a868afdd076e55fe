"""``{{ value|wrap_id }}``: a long id (a job, batch or schedule id, a dotted function path, a URL) that may wrap
only at its separators, never inside a word (issue 33: "Marketplac eRejected", "shippi ng").

The value is escaped, then a ``<wbr>`` (a line-break opportunity the browser takes only when the line is full) is
put after each separator of ``SEPARATORS``; a part between two separators is never split, so the column must be
wide enough for its longest part (the crawl, tests/browser/test_crawl.py, fails on a word drawn on two lines).
Use it instead of CSS ``overflow-wrap: anywhere`` / ``word-break: break-all``, which split words anywhere.

A random token (``TOKEN``: 16 or more hex digits, a uuid's or a worker's name) is no word: it is put in a
``<span class="rq-token">`` that may break anywhere (``word-break: break-all``, panel.css and the admin lists'
templates), so a 32-digit id fits a narrow column; the crawl does not count it as a broken word."""

import re

from django import template
from django.utils.html import conditional_escape
from django.utils.safestring import mark_safe

register = template.Library()

SEPARATORS = "-:._/?&=@,"
_AFTER = re.compile("([" + re.escape(SEPARATORS) + "]+)(?=\\S)")  # not at a word's end ("content, default")
_TAG = re.compile(r"(<[^>]*>|&[#\w]+;)")
TOKEN = re.compile(r"(?<![0-9A-Za-z])([0-9a-fA-F]{16,})(?![0-9A-Za-z])")
# A run without spaces shorter than this fits any column whole ("1/1" attempts, "12:30", "a.b"): no break in it.
MIN_BREAKABLE = 8
_WORD = re.compile(rf"\S{{{MIN_BREAKABLE},}}")


@register.filter(is_safe=True)
def wrap_id(value):
    """``value`` (any object: shown as text) escaped, with ``<wbr>`` after each run of ``SEPARATORS``."""
    if value is None or value == "":
        return ""
    return wrap_html(value)


@register.filter(is_safe=True)
def wrap_html(value):
    """Safe HTML (an admin list's rendered cell) with ``<wbr>`` after each run of ``SEPARATORS`` in its text,
    never inside a tag or an entity: the dead-letter and failure-group lists' cells, which the admin renders."""
    parts = _TAG.split(str(conditional_escape(value)))  # text not marked safe is escaped first
    return mark_safe("".join(p if _TAG.fullmatch(p) else _text(p) for p in parts))


def _text(text):
    broken = _WORD.sub(lambda word: _AFTER.sub(r"\1<wbr>", word.group(0)), text)
    return TOKEN.sub(r'<span class="rq-token">\1</span>', broken)
