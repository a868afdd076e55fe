"""The query of a job list: its page (``?page=``, ``?per_page=``: 25, 100 or 500; 100 unless told), its
order (``?order=newest|oldest``) and its filter (``?func=``: text contained in the job's function path).

No Redis here: the list's length is counted by the caller (in its own pipeline), and ``Page`` says which
slice to read (``offset``, ``per_page``) and which page links to draw (``links``: elided around the current
page, ``None`` for a gap). A page number that is no number, below 1 or past the end is clamped, never a
negative or oversized Redis offset.

``order`` and ``func`` are the operator's choices, not positions: a value that cannot be used is refused
(``BadFilter``: the field, the value and the fix), never silently replaced by another list.
"""

import re
from dataclasses import dataclass, field

from django.core.paginator import Paginator

PER_PAGE_CHOICES = (25, 100, 500)
DEFAULT_PER_PAGE = 100
ORDERS = ("newest", "oldest")
FUNC_CHARS = 200  # longest ?func= text
FUNC_RE = re.compile(r"[A-Za-z0-9_.]+")  # what a function's dotted path is made of


class BadFilter(ValueError):
    """A filter or order a list cannot use; ``str()`` names the field, the value and the fix."""

    def __init__(self, field_name, value, fix):
        self.field, self.value, self.fix = field_name, value, fix
        super().__init__(f"{field_name}={value!r} cannot be used: {fix}")


@dataclass(frozen=True)
class Query:
    order: str  # "newest" or "oldest"
    func: str  # text contained in the function's path ("" for every job)

    def matches(self, function):
        """True when a job of ``function`` (its dotted path, None when unreadable) is listed."""
        if not self.func:
            return True
        return function is not None and self.func.casefold() in function.casefold()


def func_filter(value):
    """``?func=`` as the text to look for ("" for none), or ``BadFilter``."""
    value = (value or "").strip()
    if len(value) > FUNC_CHARS:
        raise BadFilter(
            "func", value[:40] + "…", f"at most {FUNC_CHARS} characters of a function's path, e.g. func=sync"
        )
    if value and not FUNC_RE.fullmatch(value):
        raise BadFilter(
            "func",
            value,
            "give part of a function's dotted path (letters, digits, '_' and '.'), e.g. func=orders.sync",
        )
    return value


def query_of(request, default_order="newest"):
    """The order and filter ``request`` asks for, or ``BadFilter``."""
    order = request.GET.get("order") or default_order
    if order not in ORDERS:
        raise BadFilter("order", order, "use order=newest or order=oldest")
    return Query(order, func_filter(request.GET.get("func")))


def _number(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class Page:
    number: int
    per_page: int
    count: int
    num_pages: int
    links: list = field(default_factory=list)  # page numbers, None for a gap ("…")

    @property
    def offset(self):
        return (self.number - 1) * self.per_page

    @property
    def end(self):
        """The last index of the slice (ZRANGE / LRANGE's inclusive end)."""
        return self.offset + self.per_page - 1


def page_of(request, count):
    """The page ``request`` asks for in a list of ``count`` items."""
    per_page = _number(request.GET.get("per_page"), DEFAULT_PER_PAGE)
    if per_page not in PER_PAGE_CHOICES:
        per_page = DEFAULT_PER_PAGE
    num_pages = max(1, -(-count // per_page))
    number = min(max(1, _number(request.GET.get("page"), 1)), num_pages)
    links = []
    if count > per_page:
        paginator = Paginator(range(count), per_page)
        links = [None if p == Paginator.ELLIPSIS else p for p in paginator.get_elided_page_range(number)]
    return Page(number, per_page, count, num_pages, links)
