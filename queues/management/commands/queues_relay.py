"""``manage.py queues_relay [--loop] [--interval S]``: push the jobs left in the outbox to Redis.

Every worker already relays every ``OUTBOX_RELAY_SECONDS`` (queues/producer/outbox.py); this command is for
a deploy with no worker running yet, a cron job, or draining the outbox by hand after an outage.
Safe to run next to workers and other relays: a row is pushed by whoever claims it, once.
Exits non-zero when rows are left because Redis did not take them (without ``--loop``).
"""

import time

from django.core.management.base import BaseCommand, CommandError

from queues import conf
from queues.producer import outbox


class Command(BaseCommand):
    help = "Push the jobs left in the outbox (accepted in a transaction, not yet in Redis) to Redis."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true", help="keep relaying until stopped (Ctrl-C / SIGTERM)")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between relays with --loop (default: OUTBOX_RELAY_SECONDS)",
        )

    def handle(self, *args, loop=False, interval=None, **options):
        interval = float(conf.options()["OUTBOX_RELAY_SECONDS"]) if interval is None else interval
        if interval <= 0:
            raise CommandError(f"--interval is {interval!r}; give a number of seconds > 0, e.g. --interval 2.")
        try:
            while True:
                pushed, left = outbox.relay_all()
                self.stdout.write(
                    f"Outbox: {pushed} pushed, {left} left (Redis did not take them)"
                    if left
                    else f"Outbox: {pushed} pushed, none left"
                )
                if not loop:
                    break
                time.sleep(interval)
        except KeyboardInterrupt:
            return
        if left:
            raise CommandError(
                f"{left} jobs stay in the outbox: Redis did not take them (see the warning above). "
                "Run again once Redis answers; workers relay them too."
            )
