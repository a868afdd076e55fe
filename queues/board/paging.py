"""The panel's pagination of a job list: ``?page=`` and ``?per_page=`` (25, 100 or 500; 100 unless told).

No Redis here: the list's length is counted by the caller (in its own pipeline), and ``Page`` says which
slice to read (``offset``, ``per_page``) and which page links to draw (``links``: elided around the current
page, ``None`` for a gap). A page number that is no number, below 1 or past the end is clamped, never a
negative or oversized Redis offset.
"""

from dataclasses import dataclass, field

from django.core.paginator import Paginator

PER_PAGE_CHOICES = (25, 100, 500)
DEFAULT_PER_PAGE = 100


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
