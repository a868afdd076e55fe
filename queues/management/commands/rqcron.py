"""``manage.py rqcron``: refused. Periodic jobs run through ``manage.py rqscheduler``.

django-rq's ``rqcron`` enqueues from its own configuration file straight onto rq queues, past
``queues.enqueue`` (no argument validation, no job meta), and its scheduler registry is a second
place where periodic jobs would live. Declare periodic jobs in ``OPTIMA_SCHEDULES`` (or an app's
``SCHEDULES``) and run ``manage.py rqscheduler`` (docs/operator.md).
"""

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Refused in this project: declare periodic jobs in OPTIMA_SCHEDULES and run `manage.py rqscheduler`."

    def add_arguments(self, parser):
        parser.add_argument("args", nargs="*")

    def handle(self, *args, **options):
        raise CommandError(
            "rqcron is not used here: it would enqueue past queues.enqueue. Declare periodic jobs in "
            "OPTIMA_SCHEDULES (or an app's SCHEDULES) and run `manage.py rqscheduler` (docs/operator.md)."
        )
