"""``manage.py queues_reconcile [queue ...]``: bring the DeadLetter table in line with Redis.

Mirrors failed-registry jobs missing from the table (e.g. the database was down when they died) and
marks open rows whose job left the failed registry some other way: ``retried`` (requeued, e.g. from
django-rq's dashboard), or, when the job is gone from Redis, held only in the database (still open: only an
operator's discard closes a dead letter; a retry re-enqueues it from the row). Workers also run it in their
maintenance, at most every ``OPTIMA_QUEUES_OPTIONS['RECONCILE_INTERVAL']`` seconds. Safe to run at any time, repeatedly.
"""

import redis
from django.core.management.base import BaseCommand, CommandError

from queues.catalog.lookup import get_config
from queues.connection.clients import unavailable
from queues.exceptions import UnknownQueue
from queues.failures.deadletter import reconcile


class Command(BaseCommand):
    help = (
        "Mirror dead jobs missing from the DeadLetter table; mark rows whose job was requeued, or is gone from Redis."
    )

    def add_arguments(self, parser):
        parser.add_argument("queues", nargs="*", help="declared queue names (default: every queue with jobs)")

    def handle(self, *args, **options):
        names = options["queues"] or None
        try:
            for name in names or ():
                get_config(name)
            summary = reconcile(names)
        except UnknownQueue as exc:
            raise CommandError(str(exc)) from None
        except redis.RedisError as exc:
            raise CommandError(str(unavailable(exc))) from None
        self.stdout.write(f"Dead letters reconciled: {summary}")
        if summary.errors:
            raise CommandError(f"{summary.errors} dead jobs could not be mirrored; see the log above.")
