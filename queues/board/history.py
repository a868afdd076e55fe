"""The panel's recent-history charts: completed and failed jobs per minute, as inline SVG.

Drawn on the server (no JavaScript, no asset) from ``queues.metrics.history.per_minute``: one
``<g class="minute">`` per minute of the last hour, holding a green bar (completed) with a red bar
(failed) stacked on it, and a ``<title>`` the browser shows on hover. Every text that reaches the
markup (queue names come from the declarations, but are escaped anyway) goes through ``escape``.
"""
import datetime

from django.utils.html import escape
from django.utils.safestring import mark_safe

from queues.metrics import history

BAR = 5  # px per minute
HEIGHT = 48  # px of the tallest bar
COMPLETED_COLOUR, FAILED_COLOUR, AXIS_COLOUR = "#417690", "#ba2121", "#999"


def _clock(minute_start):
    return datetime.datetime.fromtimestamp(minute_start, datetime.timezone.utc).strftime("%H:%M")


def chart(queue, minutes):
    """The SVG of one queue: ``minutes`` is ``[(minute_start, completed, failed), ...]`` (``None``s
    for a minute without a sample), oldest first. Returns safe markup."""
    top = max([(c or 0) + (f or 0) for _, c, f in minutes] + [1])
    width = BAR * len(minutes)
    completed_total = sum(c or 0 for _, c, _ in minutes)
    failed_total = sum(f or 0 for _, _, f in minutes)
    label = escape(f"{queue}: {completed_total} completed, {failed_total} failed in the last hour, per minute")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="queue-history" width="{width}" '
        f'height="{HEIGHT + 1}" viewBox="0 0 {width} {HEIGHT + 1}" role="img" aria-label="{label}" '
        f'data-queue="{escape(queue)}" data-max="{top}">',
        f"<title>{label}</title>",
        f'<line x1="0" y1="{HEIGHT + 0.5}" x2="{width}" y2="{HEIGHT + 0.5}" stroke="{AXIS_COLOUR}" stroke-width="1"/>',
    ]
    for i, (start, completed, failed) in enumerate(minutes):
        x = i * BAR
        if completed is None:
            parts.append(f'<g class="minute" data-minute="{int(start)}"><title>{_clock(start)} UTC: '
                         "no sample</title></g>")
            continue
        tip = escape(f"{_clock(start)} UTC: {completed} completed, {failed} failed")
        c_height = round(HEIGHT * completed / top, 2)
        f_height = round(HEIGHT * failed / top, 2)
        parts.append(
            f'<g class="minute" data-minute="{int(start)}" data-completed="{completed}" data-failed="{failed}">'
            f"<title>{tip}</title>"
            f'<rect class="completed" x="{x}" y="{round(HEIGHT - c_height, 2)}" width="{BAR - 1}" '
            f'height="{c_height}" fill="{COMPLETED_COLOUR}"/>'
            f'<rect class="failed" x="{x}" y="{round(HEIGHT - c_height - f_height, 2)}" width="{BAR - 1}" '
            f'height="{f_height}" fill="{FAILED_COLOUR}"/></g>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def charts(connection, now, names):
    """``[{"name", "svg", "completed", "failed", "sampled"}]`` for each queue of ``names`` (in that
    order), from one read of the stored samples. ``sampled`` is False before two samples exist."""
    samples = history.read(connection)
    series = history.per_minute(samples, now)
    rows = []
    for name in names:
        minutes = series.get(name) or [(m, None, None) for m in history.minute_starts(now)]
        rows.append({
            "name": name,
            "svg": chart(name, minutes),
            "completed": sum(c or 0 for _, c, _ in minutes),
            "failed": sum(f or 0 for _, _, f in minutes),
            "sampled": any(c is not None for _, c, _ in minutes),
        })
    return rows

