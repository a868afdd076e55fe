"""``{% live_bar url %}``: the "Live: on/off" toggle of a page that refreshes itself (queues/board/live.py),
with the URL ``live.js`` polls and the seconds between polls; nothing when the refresh is off
(``QUEUE_BOARD_REFRESH_SECONDS = 0``)."""

from django import template
from django.utils.html import format_html

from queues.board.live import refresh_seconds

register = template.Library()


@register.simple_tag
def live_bar(url):
    seconds = refresh_seconds()
    if not seconds:
        return ""
    return format_html(
        '<div class="live-bar" id="live-bar" data-live-url="{}" data-refresh-seconds="{}">'
        '<button type="button" class="live-toggle" id="live-toggle" aria-pressed="true" '
        'title="Refresh this page\'s counts and rows every {} s">Live: on</button>'
        '<span class="live-status" id="live-status" aria-live="polite"></span></div>',
        url,
        seconds,
        seconds,
    )
