"""Template filters of the panel's home, workers and rq-scheduler pages (``{% load queues_home %}``): what
django-rq's ``django_rq`` library gave them, without it."""

import datetime

from django import template
from django.core.paginator import Paginator
from django.utils import dateformat, timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def timestamp_tooltip(timestamp):
    """A datetime in the configured time zone, its UTC value on hover (as django-rq's filter); naive
    means UTC (rq's convention); none shows an em-dash."""
    if not timestamp:
        return mark_safe("—")
    if timezone.is_naive(timestamp):
        utc = timestamp.replace(tzinfo=datetime.UTC)
    else:
        utc = timestamp.astimezone(datetime.UTC)
    local = utc.astimezone(timezone.get_default_timezone())
    fmt = "Y-m-d H:i:s"
    return mark_safe(
        f'<time datetime="{escape(utc.isoformat())}" title="UTC: {escape(dateformat.format(utc, fmt))}">'
        f"{escape(dateformat.format(local, fmt))}</time>"
    )


@register.filter
def is_ellipsis(page_number):
    """True for the gap markers of an elided page range (text, not a link)."""
    return page_number == Paginator.ELLIPSIS
