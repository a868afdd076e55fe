"""``manage.py rqstats``: the queues' counts per state, as django-rq's command printed them (its table, or
``--json``, ``--interval`` to poll; not its ``--yaml``, which needed PyYAML, no dependency of ours), from
the panel's statistics (``queues.board.stats``): JSON jobs only, nothing written, two round trips per Redis."""

import json
import time

import click
from django.core.management.base import BaseCommand

from queues.board.stats import statistics

ROW = "| %-15s|%10s |%10s |%10s |%10s |%10s |%10s |"
TABLE_WIDTH = 90


class Command(BaseCommand):
    help = "Print RQ statistics"

    def add_arguments(self, parser):
        parser.add_argument("-j", "--json", action="store_true", dest="json", help="Output statistics as JSON")
        parser.add_argument("-i", "--interval", dest="interval", type=float, help="Poll statistics every N seconds")

    def handle(self, *args, **options):
        if options.get("json"):
            click.echo(json.dumps(statistics()))
            return
        interval = options.get("interval")
        if not interval:
            self.dashboard(statistics(), interval)
            return
        try:
            while True:
                self.dashboard(statistics(), interval)
                time.sleep(interval)
        except KeyboardInterrupt:
            pass

    def dashboard(self, stats, interval):
        if interval:
            click.clear()
        separator = "-" * TABLE_WIDTH
        click.echo()
        click.echo("Django RQ CLI Dashboard")
        click.echo()
        click.echo(separator)
        click.echo(ROW % ("Name", "Queued", "Active", "Deferred", "Finished", "Failed", "Workers"))
        click.echo(separator)
        for queue in stats["queues"]:
            click.echo(
                ROW
                % (
                    queue["name"],
                    queue["jobs"],
                    queue["started_jobs"],
                    queue["deferred_jobs"],
                    queue["finished_jobs"],
                    queue["failed_jobs"],
                    queue["workers"],
                )
            )
        click.echo(separator)
        if interval:
            click.echo()
            click.echo("Press 'Ctrl+c' to quit")
