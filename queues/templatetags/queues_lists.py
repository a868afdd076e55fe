"""Filters of the queue page and the job lists (``queues/board/lists/``), none of which reads Redis.

- ``{{ when|when }}``: a time in the configured time zone, UTC in its tooltip (as django-rq's lists showed
  times); "—" when none.
- ``{{ job|callable_of }}``: the job's function, "corrupt: <why>" for a ``jobread.CorruptJob``.
- ``{{ job|list_state }}``: the status read with the job (never rq's ``get_status()``, one round trip per
  job), in the API's words (``queues_panel.api_state``: ``held`` for ``rate_limited``).
"""

import datetime

from django import template
from django.utils import dateformat, timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from queues.templatetags.queues_panel import api_state

register = template.Library()


@register.filter
def when(value):
    if not value:
        return mark_safe("—")
    utc = value.replace(tzinfo=datetime.UTC) if timezone.is_naive(value) else value.astimezone(datetime.UTC)
    local = utc.astimezone(timezone.get_default_timezone())
    shown, utc_shown = dateformat.format(local, "Y-m-d H:i:s"), dateformat.format(utc, "Y-m-d H:i:s")
    return mark_safe(
        f'<time datetime="{escape(utc.isoformat())}" title="UTC: {escape(utc_shown)}">{escape(shown)}</time>'
    )


@register.filter
def callable_of(job):
    try:
        return job.func_name
    except Exception as exc:  # noqa: BLE001 — jobread vetted it; whatever is left is shown, never raised
        return repr(exc)


@register.filter
def list_state(job):
    try:
        status = job.get_status(refresh=False)
    except Exception:  # noqa: BLE001 — rq cannot tell
        return "unknown"
    if status is None:
        return "unknown"
    return api_state(getattr(status, "value", status))
