"""``manage.py rqworker [queue ...]``: django-rq's worker command, for the declared queues.

Differences from django-rq's: no names means every declared queue (not just 'default'); jobs are
JSON (django-rq defaults to pickle); RQ's scheduler runs in the worker unless
``--without-scheduler`` (delayed jobs and retries need one somewhere).
"""
from django_rq.management.commands import rqworker

from queues.registry import get_config, queue_names


class Command(rqworker.Command):
    help = "Runs an RQ worker on the given declared queues (default: all of them)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--without-scheduler", action="store_true", dest="without_scheduler",
            help="Do not run RQ's scheduler in this worker (delayed jobs need one somewhere).",
        )

    def handle(self, *args, **options):
        names = list(args) or queue_names()
        for name in names:
            get_config(name)  # UnknownQueue names the declared ones
        options["serializer"] = "rq.serializers.JSONSerializer"
        options["with_scheduler"] = not options.pop("without_scheduler", False)
        return super().handle(*names, **options)
