"""The database counts of the scrape: open dead letters and outbox rows per queue, one grouped query
each, in a savepoint. The database being down zeroes them and sets every queue's database error gauge.
"""

import logging

from django.db import DatabaseError, transaction
from django.db.models import Count

from queues import conf
from queues.metrics.snapshot import describe_error
from queues.models import DeadLetter
from queues.producer import outbox

logger = logging.getLogger("queues.metrics")


def _from_database(samples, what, read):
    """``read()``'s grouped query, in a savepoint (called inside a transaction, a failed query must
    not break the caller's). The database being down marks every queue's database error, logs one
    line naming ``what``, and returns None: the values stay zeros."""

    try:
        with transaction.atomic():
            return read()
    except DatabaseError as exc:
        logger.warning("counting %s failed (%s); reported as zeros", what, describe_error(exc))
        for sample in samples.values():
            sample.database_error = True
        return None


def read_dead_letters(samples):
    """Open dead letters per queue: one grouped query."""

    counts = _from_database(
        samples,
        "open dead letters",
        lambda: dict(
            DeadLetter.objects.filter(prefix=conf.prefix(), status=DeadLetter.Status.OPEN)
            .values_list("queue")
            .annotate(n=Count("id"))
            .order_by()
        ),
    )
    if counts is None:
        return
    for name, sample in samples.items():
        sample.dead_letters = counts.get(name, 0)


def read_outbox(samples, now):
    """Outbox rows per queue and the age of the oldest (queues/producer/outbox.py): one grouped query."""

    stats = _from_database(samples, "the outbox", outbox.stats)
    if stats is None:
        return
    for name, sample in samples.items():
        rows, oldest = stats.get(name, (0, None))
        sample.outbox = rows
        sample.outbox_oldest_seconds = max(0.0, now - oldest.timestamp()) if oldest is not None else 0.0
