"""``manage.py rqworker [queue ...]``: django-rq's worker command, for the declared queues.

Differences from django-rq's: no names means every declared queue (not just 'default'); jobs are
JSON (django-rq defaults to pickle); RQ's scheduler runs in the worker unless
``--without-scheduler`` (delayed jobs and retries need one somewhere); ``--grace`` sets how long a
stopping worker lets its job finish (``SHUTDOWN_GRACE_SECONDS``); and a worker started while Redis
is unreachable waits for it instead of exiting (a supervisor's restart loop is not needed).

One process serves all the queues it is given, in the order given (priority): its dequeue is an
atomic LMOVE for one queue or several (``queues.resilience.dequeue``), so running one process per
queue is a capacity choice, not a safety one. docs/operations.md has the stop timeouts to configure.
"""
import logging
import os
import sys
import time

from django.core.management.base import CommandError
from django_rq.management.commands import rqworker
from django_rq.utils import reset_db_connections
from django_rq.workers import get_worker
from rq.logutils import setup_loghandlers

from queues.connection import mask_url, queues_url
from queues.registry import get_config, queue_names
from queues.resilience import config
from queues.resilience.outage import REDIS_ERRORS, Backoff, OutageLog


def _grace(value):
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise CommandError(f"--grace must be a number of seconds >= 0, got {value!r}. Example: --grace 25")
    return seconds


class Command(rqworker.Command):
    help = "Runs an RQ worker on the given declared queues (default: all of them)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--without-scheduler", action="store_true", dest="without_scheduler",
            help="Do not run RQ's scheduler in this worker (delayed jobs need one somewhere).",
        )
        parser.add_argument(
            "--grace", dest="grace", default=None,
            help="Seconds a stopping worker lets its running job finish before putting it back in its queue "
                 "(default: OPTIMA_QUEUES_OPTIONS['SHUTDOWN_GRACE_SECONDS'], 25). The supervisor's stop "
                 "timeout must be longer: see docs/operations.md.",
        )

    def handle(self, *args, **options):
        names = list(args) or queue_names()
        for name in names:
            get_config(name)  # UnknownQueue names the declared ones
        grace = config.options().shutdown_grace if options["grace"] is None else _grace(options["grace"])
        verbosity = options["verbosity"]
        level = "DEBUG" if verbosity >= 2 else ("WARNING" if verbosity == 0 else "INFO")
        setup_loghandlers(level)
        if options.get("pid"):
            with open(os.path.expanduser(options["pid"]), "w") as fp:
                fp.write(str(os.getpid()))
        outage = OutageLog(logging.getLogger("rq.worker"), f"rqworker (Redis at {mask_url(queues_url())})")
        backoff = Backoff(config.options().redis_retry_max)
        while True:
            worker = self._build(names, options, grace, outage, backoff)
            reset_db_connections()  # no database connection may be shared with the forked work horses
            try:
                worker.work(
                    burst=options["burst"], with_scheduler=not options["without_scheduler"], logging_level=level,
                    max_jobs=options["max_jobs"], max_idle_time=options["max_idle_time"],
                )
                break
            except REDIS_ERRORS as exc:  # Redis went away during the start-up (registration, scheduler)
                outage.failed(exc, "start")
                if getattr(worker, "lifeline", None) is not None:
                    worker.lifeline.stop()
                time.sleep(backoff.next())
        if not (worker._stop_requested or options["burst"] or options["max_jobs"] or options["max_idle_time"]):
            # rq's loop ends on an unexpected exception (logged above): say so to the supervisor.
            sys.exit(1)

    def _build(self, names, options, grace, outage, backoff):
        """The worker object (its constructor talks to Redis), waiting for Redis as long as it takes."""
        while True:
            try:
                return get_worker(
                    *names, worker_class=options["worker_class"], queue_class=options["queue_class"],
                    job_class=options["job_class"], name=options["name"], worker_ttl=options["worker_ttl"],
                    serializer="rq.serializers.JSONSerializer", shutdown_grace=grace,
                )
            except REDIS_ERRORS as exc:
                outage.failed(exc, "start")
                time.sleep(backoff.next())
