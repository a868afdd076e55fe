"""``manage.py rqscheduler``: rq-scheduler's process (periodic jobs), under the environment prefix.

On start it registers the declared schedules (``queues.periodic.schedules.register``: idempotent, removes the
ones no longer declared), then polls every ``--interval`` seconds (default
``OPTIMA_QUEUES_OPTIONS['SCHEDULER_INTERVAL']``, 5; rq-scheduler's own default is 60) and enqueues each
due schedule as a fresh job (``queues.periodic.schedules.scheduler_class``). Running two is safe: one holds the
lock per poll, and a run's job id derives from its tick.
"""

import logging
import os
import time

import redis
from django_rq.management.commands import rqscheduler

from queues import conf, logsafe
from queues.catalog.lookup import OptimaJob, get_queue, queue_names
from queues.connection.clients import describe, get_connection
from queues.keyspace import keys, quarantine
from queues.logs import console
from queues.periodic import schedules
from queues.periodic.supervision import run_rq_scheduler

logger = logging.getLogger("queues.schedules")


class Command(rqscheduler.Command):
    help = "Runs the rq-scheduler process (periodic jobs declared in OPTIMA_SCHEDULES / apps' SCHEDULES)."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.set_defaults(interval=None, queue=None)
        parser.add_argument("--burst", action="store_true", help="Register, enqueue what is due once, and exit.")
        parser.add_argument(
            "--no-register",
            action="store_true",
            dest="no_register",
            help="Do not (re)register the declared schedules at start.",
        )

    def handle(self, *args, **options):
        logsafe.install()  # what it logs from Redis (keys, members, job ids) cannot forge a line
        verbosity = options["verbosity"]
        level = "DEBUG" if verbosity >= 2 else ("WARNING" if verbosity == 0 else "INFO")
        # Not rq-scheduler's setup_loghandlers: it adds a handler of its own to a logger that also
        # propagates to the root handler of settings.LOGGING, and every line came out twice.
        for name in ("rq_scheduler", "queues.schedules"):
            logging.getLogger(name).setLevel(level)
        # A project with no LOGGING for them still sees the scheduler's lines (queues/logs/console.py).
        console.unless_configured(level, ("queues", "rq_scheduler"))
        if options.get("pid"):
            with open(options["pid"], "w") as fp:
                fp.write(str(os.getpid()))
        interval = options["interval"] or conf.options()["SCHEDULER_INTERVAL"]
        name = options["queue"] or ("default" if "default" in queue_names() else queue_names()[0])
        connection = get_connection()
        if not options["no_register"]:
            self._register(connection)
        scheduler = schedules.scheduler_class()(
            queue_name=name,
            queue=get_queue(name, connection=connection),
            interval=interval,
            connection=connection,
            job_class=OptimaJob,
        )
        run_rq_scheduler(scheduler, burst=options["burst"])

    def _register(self, connection, retry_max=5.0):
        """Register the schedules, waiting for Redis if it is not there yet. A key of the wrong type
        (rq-scheduler's set, a template's hash, the paused set) is renamed aside and the registration
        runs once more (``queues.keyspace.quarantine``); an entry that still cannot be read is reported and the
        scheduler runs the templates already registered."""
        delay = 0.5
        while True:
            try:
                summary = quarantine.retry_once(
                    connection,
                    lambda: self._expected(connection),
                    lambda: schedules.register(connection),
                    who="rqscheduler",
                )
            except redis.ResponseError as exc:
                quarantine.report(exc, who="rqscheduler", what="register the declared periodic jobs")
                return None
            except redis.RedisError as exc:
                logger.warning(
                    "Cannot register periodic jobs, Redis at %s unavailable (%s); retrying in %.1fs",
                    describe(),
                    type(exc).__name__,
                    delay,
                )
                time.sleep(delay)
                delay = min(delay * 2, retry_max)
                continue
            except Exception as exc:  # noqa: BLE001 — an entry it cannot read: the scheduler still runs
                quarantine.report(exc, who="rqscheduler", what="register the declared periodic jobs")
                return None
            self.stdout.write(f"Periodic jobs: {summary}")
            return summary

    @staticmethod
    def _expected(connection):
        return {
            schedules.scheduled_jobs_key(): "zset",
            keys.schedules_paused_key(): "set",
            **{OptimaJob.key_for(s.template_id): "hash" for s in schedules.declared_schedules()},
        }
