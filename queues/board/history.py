"""The panel's history charts: completed jobs and failed attempts per minute over the last hour and per
ten minutes over the last 72 hours, as inline SVG.

Drawn on the server (no JavaScript, no asset) from ``queues.metrics.history.per_minute`` and
``per_ten_minutes``: one ``<g class="minute">`` (``<g class="period">`` in the 72-hour chart) per
period, holding a blue bar (completed jobs) with a red bar (failed attempts, retried or not) stacked
on it, and a ``<title>`` the browser shows on hover. Jobs that died are not in these bars: the queue
table's "Dead jobs" counts them. Every text that reaches the
markup (queue names come from the declarations, but are escaped anyway) goes through ``escape``.
"""

import datetime

from django.utils.html import escape
from django.utils.safestring import mark_safe

from queues.keyspace import keys
from queues.metrics import history

BAR = 5  # px per minute
COARSE_BAR = 2  # px per ten minutes: 432 of them, 864 px for 72 h
HEIGHT = 48  # px of the tallest bar
COMPLETED_COLOUR, FAILED_COLOUR, AXIS_COLOUR = "#417690", "#ba2121", "#999"


def _clock(minute_start):
    return datetime.datetime.fromtimestamp(minute_start, datetime.UTC).strftime("%H:%M")


def _day_clock(start):
    return datetime.datetime.fromtimestamp(start, datetime.UTC).strftime("%a %H:%M")


def chart(queue, minutes, *, coarse=False):
    """The SVG of one queue: ``minutes`` is ``[(period_start, completed, failed), ...]`` (``None``s
    for a period without a sample), oldest first; per minute, or per ten minutes when ``coarse``.
    Returns safe markup."""
    bar, group, css = (
        (COARSE_BAR, "period", "queue-history queue-history-72h") if coarse else (BAR, "minute", "queue-history")
    )
    span = "in the last 72 hours, per 10 minutes" if coarse else "in the last hour, per minute"
    clock = _day_clock if coarse else _clock
    top = max([(c or 0) + (f or 0) for _, c, f in minutes] + [1])
    width = bar * len(minutes)
    completed_total = sum(c or 0 for _, c, _ in minutes)
    failed_total = sum(f or 0 for _, _, f in minutes)
    label = escape(f"{queue}: {completed_total} completed, {failed_total} attempts failed {span}")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{css}" width="{width}" '
        f'height="{HEIGHT + 1}" viewBox="0 0 {width} {HEIGHT + 1}" role="img" aria-label="{label}" '
        f'data-queue="{escape(queue)}" data-max="{top}">',
        f"<title>{label}</title>",
        f'<line x1="0" y1="{HEIGHT + 0.5}" x2="{width}" y2="{HEIGHT + 0.5}" stroke="{AXIS_COLOUR}" stroke-width="1"/>',
    ]
    for i, (start, completed, failed) in enumerate(minutes):
        x = i * bar
        if completed is None:
            parts.append(
                f'<g class="{group}" data-{group}="{int(start)}"><title>{clock(start)} UTC: no sample</title></g>'
            )
            continue
        tip = escape(f"{clock(start)} UTC: {completed} completed, {failed} attempts failed")
        c_height = round(HEIGHT * completed / top, 2)
        f_height = round(HEIGHT * failed / top, 2)
        parts.append(
            f'<g class="{group}" data-{group}="{int(start)}" data-completed="{completed}" data-failed="{failed}">'
            f"<title>{tip}</title>"
            f'<rect class="completed" x="{x}" y="{round(HEIGHT - c_height, 2)}" width="{max(1, bar - 1)}" '
            f'height="{c_height}" fill="{COMPLETED_COLOUR}"/>'
            f'<rect class="failed" x="{x}" y="{round(HEIGHT - c_height - f_height, 2)}" width="{max(1, bar - 1)}" '
            f'height="{f_height}" fill="{FAILED_COLOUR}"/></g>'
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def charts(connection, now, names):
    """``[{"name", "svg", "completed", "failed", "sampled", "svg_72h", "completed_72h", "failed_72h",
    "sampled_72h"}]`` for each queue of ``names`` (in that order), from one read of the stored samples
    (both lists, one round trip). ``sampled`` is False before two samples exist."""
    return charts_of(history.read_both(connection), now, names)


def samples(minute_reply, coarse_reply):
    """``history.read_both``'s answer from the replies of its two LRANGEs, sent in another pipeline (the
    dashboard's first round trip): an entry that is not a sample is skipped, a key that is not a list reads
    as no history (both reported)."""
    return (
        history._parsed(keys.history_key(), minute_reply),
        history._parsed(keys.history_coarse_key(), coarse_reply),
    )


def charts_of(both, now, names):
    """``charts`` from ``(minute samples, ten-minute samples)`` already read."""
    minute_samples, coarse_samples = both
    series = history.per_minute(minute_samples, now)
    coarse = history.per_ten_minutes(coarse_samples, now)
    rows = []
    for name in names:
        minutes = series.get(name) or [(m, None, None) for m in history.minute_starts(now)]
        periods = coarse.get(name) or [
            (m, None, None) for m in history.period_starts(now, history.COARSE_PERIODS, history.COARSE)
        ]
        rows.append(
            {
                "name": name,
                "svg": chart(name, minutes),
                "completed": sum(c or 0 for _, c, _ in minutes),
                "failed": sum(f or 0 for _, _, f in minutes),
                "sampled": any(c is not None for _, c, _ in minutes),
                "svg_72h": chart(name, periods, coarse=True),
                "completed_72h": sum(c or 0 for _, c, _ in periods),
                "failed_72h": sum(f or 0 for _, _, f in periods),
                "sampled_72h": any(c is not None for _, c, _ in periods),
            }
        )
    return rows
