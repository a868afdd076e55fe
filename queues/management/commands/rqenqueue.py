"""``manage.py rqenqueue``: django-rq's command, made to go through ``queues.enqueue_call``.

django-rq's own calls ``Queue.enqueue_call`` directly: no argument validation, no job meta (attempts,
queue), no declared-queue check. This one keeps its command line (``[-q QUEUE] [-t SECONDS] FUNC
[ARG ...]``, arguments passed as strings as django-rq does, or as JSON with ``--json``) and enqueues
exactly as application code does, so the worker treats the job like any other.
"""

import json

from django.core.management.base import BaseCommand, CommandError

from queues.exceptions import QueuesError
from queues.producer.api import enqueue_call


class Command(BaseCommand):
    help = "Enqueue FUNC(ARG, ...) on a declared queue through queues.enqueue_call (validated, JSON only)."

    def add_arguments(self, parser):
        parser.add_argument("--queue", "-q", dest="queue", default="default", help="A declared queue [default].")
        parser.add_argument("--timeout", "-t", type=int, dest="timeout", help="The job's timeout in seconds.")
        parser.add_argument(
            "--json",
            action="store_true",
            dest="as_json",
            help='Read each ARG as JSON (1, true, null, "text", [..], {..}), not as a string.',
        )
        parser.add_argument("func", help="Dotted path of the job function, e.g. features.orders.jobs.sync.")
        parser.add_argument("job_args", nargs="*", metavar="ARG")

    def handle(self, *args, **options):
        job_args = list(options["job_args"])
        if options["as_json"]:
            try:
                job_args = [json.loads(arg) for arg in job_args]
            except ValueError as exc:
                raise CommandError(f"--json: an argument is not JSON ({exc}); quote strings as '\"text\"'.") from exc
        try:
            job = enqueue_call(options["queue"], options["func"], args=job_args, timeout=options["timeout"])
        except QueuesError as exc:
            raise CommandError(str(exc)) from exc
        if options["verbosity"]:
            self.stdout.write(f"Job {job.id} created")
