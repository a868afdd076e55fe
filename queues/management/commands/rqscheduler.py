"""``manage.py rqscheduler``: rq-scheduler's process, under the environment prefix."""
from django_rq.management.commands import rqscheduler


class Command(rqscheduler.Command):
    help = "Runs the rq-scheduler process (periodic jobs) under QUEUE_PREFIX."
