"""Cron in a time zone: the wall-clock ticks of a cron expression as UTC instants, safe across
daylight-saving changes. Pure (no Redis, no settings).

A cron expression names wall-clock times of its zone. Most of them are one instant; around a
daylight-saving change some are not:

- skipped (spring forward, e.g. Europe/Berlin 02:00 -> 03:00): a wall time in the gap runs once, at the
  first valid minute after it, the instant of the change (03:00 local). Several ticks in the gap run once.
- repeated (fall back, 03:00 -> 02:00): a wall time met twice runs once, at its first occurrence.

How: the cron expression is evaluated on *wall* times (naive local times, labelled UTC so the crontab
package does no zone arithmetic of its own), and each wall tick is then mapped to its instant.
"""

import datetime as dt
import zoneinfo
from functools import lru_cache

import crontab

UTC = dt.UTC


@lru_cache(maxsize=256)
def zone(name: str) -> dt.tzinfo:
    """The ``zoneinfo`` zone ``name`` (IANA), UTC for "UTC". Raises ``zoneinfo.ZoneInfoNotFoundError``
    (a ``KeyError``) or ``ValueError`` for an unknown or malformed name."""
    if name == "UTC":
        return UTC
    return zoneinfo.ZoneInfo(name)


def zone_problem(name: object) -> str | None:
    """Why ``name`` is not a usable zone, or None."""
    if not isinstance(name, str) or not name:
        return "is not a string"
    try:
        zone(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return "is not a known IANA time zone"
    return None


def _wall(instant: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """The wall time (labelled UTC, see the module docstring) of the aware ``instant`` in ``tz``."""
    return instant.astimezone(tz).replace(tzinfo=UTC, fold=0)


def instant_of(wall: dt.datetime, tz: dt.tzinfo) -> dt.datetime:
    """The UTC instant a cron tick at wall time ``wall`` (labelled UTC) of ``tz`` runs at: its first
    occurrence when repeated, the first valid minute after it when skipped."""
    local = wall.replace(tzinfo=tz, fold=0)
    first = local.astimezone(UTC)
    if _wall(first, tz) == wall:
        return first  # it exists (its first occurrence when the hour repeats: fold=0)
    # In a gap: fold=1 maps it with the offset after the change (an instant before the change), fold=0
    # with the offset before it (one after the change). The change is between; find its minute.
    cursor = local.replace(fold=1).astimezone(UTC).replace(second=0, microsecond=0)
    while _wall(cursor, tz) <= wall and cursor < first:
        cursor += dt.timedelta(minutes=1)
    return cursor


def next_tick(cron: str, tz: dt.tzinfo, after: dt.datetime) -> dt.datetime:
    """The first tick of ``cron`` in ``tz`` strictly after the aware ``after``, as a UTC instant."""
    table = crontab.CronTab(cron)
    wall = _wall(after, tz)
    while True:
        wall = table.next(now=wall, return_datetime=True, default_utc=True)
        instant = instant_of(wall, tz)
        if instant > after:  # a repeated wall time whose first occurrence has passed: not again
            return instant


def previous_ticks(cron: str, tz: dt.tzinfo, before: dt.datetime, not_before: dt.datetime, limit: int):
    """Up to ``limit`` ticks of ``cron`` in ``tz`` in [``not_before``, ``before``), latest first."""
    table = crontab.CronTab(cron)
    local = before.astimezone(tz)
    wall = local.replace(tzinfo=UTC, fold=0)
    if getattr(local, "fold", 0) == 1:  # second pass of a repeated hour: its first pass lies behind too
        wall += local.replace(fold=0).utcoffset() - local.utcoffset()  # type: ignore[operator]
    found: list[dt.datetime] = []
    while len(found) < limit:
        wall = table.previous(now=wall, return_datetime=True, default_utc=True)
        instant = instant_of(wall, tz)
        if instant < not_before:
            break
        if instant < before and instant not in found:  # ticks in a gap run once, at the change
            found.append(instant)
    return found
