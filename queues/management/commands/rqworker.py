"""``manage.py rqworker [queue ...]``: django-rq's worker command, for the declared queues.

Differences from django-rq's: no names means every declared queue (not just 'default'); jobs are
JSON (django-rq defaults to pickle); RQ's scheduler runs in the worker unless
``--without-scheduler`` (delayed jobs and retries need one somewhere); ``--grace`` sets how long a
stopping worker lets its job finish (``SHUTDOWN_GRACE_SECONDS``); and a worker started while Redis
is unreachable waits for it instead of exiting (a supervisor's restart loop is not needed).

One process serves all the queues it is given, in the order given (priority): its dequeue is an
atomic LMOVE for one queue or several (``queues.worker.dequeue``), so running one process per
queue is a capacity choice, not a safety one. docs/operations.md has the stop timeouts to configure.

``--no-fork`` runs ``queues.worker.OptimaSimpleWorker``: jobs run in the worker's own process (no
fork per job), for trusted I/O-bound jobs; docs/operations.md says what it gives up. ``--concurrency N``
(N > 1) runs ``queues.worker.OptimaConcurrentWorker``: up to N jobs at once, in threads of one
fork-free process (``queues/worker/concurrent.py``). ``--async N`` runs ``queues.worker.OptimaAsyncWorker``:
up to N jobs at once, the ``async def`` ones as coroutines of one event loop (``queues/worker/asyncworker.py``).

System checks: a worker runs the ones about configuration (``WORKER_CHECK_TAGS``: this app's own,
models, caches, security) and the queues' Redis (``queues.E070``: an evicting Redis stops it; ``queues.W063``: a
worker of a release up to 6f24d7d at work while rq's execution records are off), not those of URLs, templates
and the admin, which import every view and template (~30 MiB more per worker process, copied on every fork: ~1 ms
per job). ``manage.py check``
in the release step runs them all (docs/operations.md#deploying). Before the first fork the worker
has every job module imported (``queues.catalog.jobs``, at Django start), so its horses do not import one per job.
"""

import faulthandler
import logging
import os
import signal
import sys
import time

from django.core.checks import Tags
from django.core.management.base import CommandError
from django.utils.module_loading import import_string
from django_rq.management.commands import rqworker
from django_rq.utils import reset_db_connections
from django_rq.workers import get_worker
from rq.logutils import setup_loghandlers

from queues import logsafe, rqcompat
from queues.catalog.lookup import get_config
from queues.connection import servers
from queues.connection.clients import describe
from queues.connection.outage import REDIS_ERRORS, Backoff, OutageLog
from queues.exceptions import UnknownQueue
from queues.logs import console
from queues.worker import kernel
from queues.worker import options as config
from queues.worker.asyncworker import OptimaAsyncWorker
from queues.worker.concurrent import OptimaConcurrentWorker

WORKER_CHECK_TAGS = [Tags.compatibility, Tags.models, Tags.caches, Tags.security, Tags.commands, "redis"]


def declared_names(args, server=None):
    """The queue names given (default: every declared queue of ``server``, or of the default server); an
    unknown one is refused with the declared ones listed, queues of two Redis servers naming each one's
    (queues/connection/servers.py: a worker's connection is its queues' server)."""
    names = list(args)
    for name in names:
        try:
            get_config(name)
        except UnknownQueue as exc:
            raise CommandError(str(exc)) from None
    try:
        return servers.for_worker(names, server)[0]
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def parse_grace(value):
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1
    if seconds < 0:
        raise CommandError(f"--grace must be a number of seconds >= 0, got {value!r}. Example: --grace 25")
    return seconds


class Command(rqworker.Command):
    help = "Runs an RQ worker on the given declared queues (default: all of them)."
    requires_system_checks = []  # WORKER_CHECK_TAGS instead, in handle()

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument(
            "--server",
            dest="server",
            default=None,
            help="Serve every declared queue of this Redis server (a name of QUEUES_REDIS_SERVERS, or 'default'). "
            "A worker serves the queues of one server: queue names of two are refused.",
        )
        parser.add_argument(
            "--without-scheduler",
            action="store_true",
            dest="without_scheduler",
            help="Do not run RQ's scheduler in this worker (delayed jobs need one somewhere).",
        )
        parser.add_argument(
            "--no-fork",
            action="store_true",
            dest="no_fork",
            help="Run jobs in this process instead of a forked work horse per job (queues.worker."
            "OptimaSimpleWorker): faster for trusted I/O-bound jobs; no hard kill at timeout + 60 s or at "
            "the end of the grace, and a job that crashes the interpreter ends the worker. docs/operations.md.",
        )
        parser.add_argument(
            "--concurrency",
            dest="concurrency",
            default=None,
            help="Jobs run at once in this process, each in a thread (default 1: one at a time). N > 1 runs "
            f"{CONCURRENT} (fork-free, as --no-fork); docs/operations.md.",
        )
        parser.add_argument(
            "--async",
            dest="async_jobs",
            default=None,
            help="Jobs run at once in this process, the async def ones as coroutines of one event loop, plain "
            f"functions each in a thread (runs {ASYNC}, fork-free as --no-fork; not with --concurrency); "
            "docs/operations.md.",
        )
        parser.add_argument(
            "--grace",
            dest="grace",
            default=None,
            help="Seconds a stopping worker lets its running job finish before putting it back in its queue "
            "(default: OPTIMA_QUEUES_OPTIONS['SHUTDOWN_GRACE_SECONDS'], 25). The supervisor's stop "
            "timeout must be longer: see docs/operations.md.",
        )

    def handle(self, *args, **options):
        chosen = worker_class(options)  # a bad --concurrency or --async is refused before anything starts
        names, grace, level = start_command(self, args, options)
        where = describe(server=servers.of_queue(names[0]))  # its queues' server
        outage = OutageLog(logging.getLogger("rq.worker"), f"rqworker (Redis at {where})")
        backoff = Backoff(config.options().redis_retry_max)
        # The job modules were imported when Django started (queues.catalog.jobs.autodiscover, in
        # QueuesConfig.ready), so horses share them instead of each importing its own copy.
        build_kwargs = {
            "worker_class": chosen,
            "queue_class": options["queue_class"],
            "job_class": options["job_class"],
            "name": options["name"],
            "worker_ttl": options["worker_ttl"],
            **concurrency_kwargs(options),
        }
        worker = run_worker(
            lambda: build_worker(names, grace, outage, backoff, **build_kwargs),
            outage,
            backoff,
            burst=options["burst"],
            with_scheduler=not options["without_scheduler"],
            logging_level=level,
            max_jobs=options["max_jobs"],
            max_idle_time=options["max_idle_time"],
        )
        if not (rqcompat.stop_requested(worker) or options["burst"] or options["max_jobs"] or options["max_idle_time"]):
            # rq's loop ends on an unexpected exception (logged above): say so to the supervisor.
            sys.exit(1)


def start_command(command, args, options):
    """What ``rqworker`` and ``rqworker-pool`` do first: the configuration checks, the queue names,
    the grace, logging and the pid file. -> (names, grace seconds, log level)."""
    logsafe.install()  # what the worker logs from Redis (job ids, entries, key names) cannot forge a line
    dump_stacks_on(STACKS_SIGNAL)
    kernel.fresh_std_streams_after_fork()  # a horse or RQ's scheduler never inherits a stream's lock held
    command.check(tags=WORKER_CHECK_TAGS)
    names = declared_names(args, options.get("server"))
    grace = config.options().shutdown_grace if options["grace"] is None else parse_grace(options["grace"])
    verbosity = options["verbosity"]
    level = "DEBUG" if verbosity >= 2 else ("WARNING" if verbosity == 0 else "INFO")
    setup_loghandlers(level)  # rq's lines on the console unless the project configured rq.worker's
    console.unless_configured(level)  # and the app's (one line per job outcome), as rq does for its own
    if not args and options.get("server") is None and servers.left_out(servers.DEFAULT):
        logging.getLogger("rq.worker").warning(
            "Serving the default Redis server's queues; those of %s need a worker of their own (--server NAME).",
            ", ".join(servers.left_out(servers.DEFAULT)),
        )
    if options.get("pid"):
        with open(os.path.expanduser(options["pid"]), "w") as fp:
            fp.write(str(os.getpid()))
    return names, grace, level


STACKS_SIGNAL = signal.SIGUSR1  # ``kill -USR1 <pid>``: every thread's stack on stderr (docs/operations.md)


def dump_stacks_on(signum):
    """``kill -USR1 <worker pid>`` writes every thread's Python stack to stderr, and the worker goes
    on. Done by faulthandler in C, so it answers even when every thread is blocked on a lock (a
    worker that does not stop): what py-spy would show, without installing it."""
    faulthandler.register(signum, file=sys.stderr, all_threads=True, chain=False)


FORK_FREE = "queues.worker.OptimaSimpleWorker"
CONCURRENT = "queues.worker.OptimaConcurrentWorker"
ASYNC = "queues.worker.OptimaAsyncWorker"


def _whole_number(value):
    """An option's value as a whole number; 0 (refused by the caller) when it is not one."""
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def parse_concurrency(value):
    """``--concurrency``: a whole number of jobs >= 1 (None: 1)."""
    if value is None:
        return 1
    number = _whole_number(value)
    if number < 1:
        raise CommandError(
            f"--concurrency must be a whole number of jobs >= 1, got {value!r}. Example: "
            "--concurrency 8 (8 jobs at once in one process; 1, the default, runs one at a time)."
        )
    return number


def async_jobs(options):
    """``--async``: None when not given, else a whole number of jobs >= 1; refused with ``--concurrency``
    (``--async N`` sizes both kinds of job: a plain function runs in a thread of its own, one of the N)."""
    value = options.get("async_jobs")
    if value is None:
        return None
    number = _whole_number(value)
    if number < 1:
        raise CommandError(
            f"--async must be a whole number of jobs >= 1, got {value!r}. Example: --async 500 (up to 500 jobs "
            "at once in one process: async def jobs as coroutines of one event loop, plain ones each in a thread)."
        )
    if options.get("concurrency") is not None:
        raise CommandError(
            f"--async {number} cannot be combined with --concurrency {options['concurrency']}: --async {number} "
            f"already runs up to {number} jobs at once (async def jobs on one event loop, plain functions each in a "
            "thread of their own). Drop --concurrency."
        )
    return number


def concurrency_kwargs(options):
    """What the worker class is built with for ``--concurrency`` or ``--async`` (nothing for 1: today's workers)."""
    slots = async_jobs(options)
    if slots is not None:
        return {"concurrency": slots}
    number = parse_concurrency(options.get("concurrency"))
    return {"concurrency": number} if number > 1 else {}


def worker_class(options):
    """The dotted worker class: ``--async N`` is OptimaAsyncWorker, ``--concurrency N`` (N > 1)
    OptimaConcurrentWorker, ``--no-fork`` OptimaSimpleWorker; else ``--worker-class`` or settings."""
    chosen = options.get("worker_class")
    slots = async_jobs(options)
    if slots is not None:
        if chosen and not _subclass_of(chosen, OptimaAsyncWorker):
            raise CommandError(
                f"--async {slots} runs {ASYNC} (up to {slots} jobs at once in one fork-free process, async def "
                f"jobs on one event loop); it cannot be combined with --worker-class {chosen!r}. Drop "
                f"--worker-class (or name a subclass of {ASYNC})."
            )
        return chosen or ASYNC
    number = parse_concurrency(options.get("concurrency"))
    if number > 1:
        if chosen and not _subclass_of(chosen, OptimaConcurrentWorker):
            raise CommandError(
                f"--concurrency {number} runs {number} jobs at once in threads of one fork-free process "
                f"({CONCURRENT}); it cannot be combined with --worker-class {chosen!r}, which runs one job at a "
                f"time. Drop --worker-class (or name a subclass of {CONCURRENT}), or drop --concurrency "
                "and run more processes (rqworker-pool --num-workers)."
            )
        return chosen or CONCURRENT
    if not options.get("no_fork"):
        return chosen
    if chosen and chosen != FORK_FREE:
        raise CommandError(
            f"--no-fork runs {FORK_FREE}; it cannot be combined with --worker-class {chosen!r}. Drop one of the two."
        )
    return FORK_FREE


def _subclass_of(dotted, base):
    try:
        cls = import_string(dotted) if isinstance(dotted, str) else dotted
    except ImportError as exc:
        raise CommandError(f"--worker-class {dotted!r} cannot be imported: {exc}") from None
    return isinstance(cls, type) and issubclass(cls, base)


def build_worker(names, grace, outage, backoff, **kwargs):
    """The worker object (its constructor talks to Redis), waiting for Redis as long as it takes.
    JSON jobs only, whatever ``kwargs`` says."""
    while True:
        try:
            return get_worker(*names, serializer="rq.serializers.JSONSerializer", shutdown_grace=grace, **kwargs)
        except REDIS_ERRORS as exc:
            outage.failed(exc, "start")
            time.sleep(backoff.next())


def run_worker(build, outage, backoff, **work_kwargs):
    """Run the worker ``build()`` returns until its loop ends; return it. Redis going away during
    the start-up (registration, scheduler) is waited out and the worker built again. Shared by
    ``rqworker`` and each member of ``rqworker-pool``."""
    while True:
        worker = build()
        reset_db_connections()  # no database connection may be shared with the forked work horses
        try:
            worker.work(**work_kwargs)
            return worker
        except REDIS_ERRORS as exc:
            outage.failed(exc, "start")
            if getattr(worker, "lifeline", None) is not None:
                worker.lifeline.stop()
            time.sleep(backoff.next())
