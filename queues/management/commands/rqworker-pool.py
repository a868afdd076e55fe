"""``manage.py rqworker-pool [queue ...] --num-workers N``: N OptimaWorkers forked from one process.

Replaces django-rq's command of the same name (``queues`` comes before ``django_rq`` in
INSTALLED_APPS), which runs stock rq workers with pickle. Each member is exactly what
``manage.py rqworker`` runs — same worker class, JSON jobs only, same queues (no names: every
declared queue), same ``--grace``, ``--without-scheduler`` and ``--concurrency`` (N > 1: each member
runs N jobs at once in threads, as ``rqworker --concurrency N``) or ``--async`` (each member is what
``rqworker --async N`` runs) — built and started by the same code
(``rqworker.build_worker`` / ``run_worker``). What the pool adds:

- memory: the master loads Django, the app and every installed app's ``jobs`` module once, freezes
  the garbage collector's view of them (``gc.freeze()``: collections in the members do not write to
  those pages), then forks; the members share those pages copy-on-write (bench/pool_memory.py);
- a member that dies is forked again (rq's ``WorkerPool`` loop, every second);
- started while Redis is unreachable, the master waits for it before forking (as ``rqworker`` does);
- members die with the master (``die_with_parent``: PR_SET_PDEATHSIG on Linux), and their work horses
  and scheduler processes with them, so a SIGKILLed pool leaves no orphan: its jobs take the
  abandoned-job path (docs/operations.md), as a SIGKILLed ``rqworker``'s do;
- SIGTERM/SIGINT to the master is passed on to every member, which stops as ``rqworker`` does (its
  running job may finish within the grace, then goes back to its queue); the master waits up to
  the grace + ``STOP_MARGIN_SECONDS`` for them, SIGKILLs any member still there, and exits (0 when
  all stopped by themselves). A second signal is passed on too: the members put their jobs back now.

rq's ``WorkerPool`` is reused for its supervision loop (start, reap, respawn, stop); we override
where it does not fit, each time saying why below.
"""

import gc
import logging
import os
import signal
import sys
import time

from django.core.management.base import BaseCommand, CommandError
from django_rq.utils import reset_db_connections
from rq.serializers import JSONSerializer
from rq.worker_pool import ForkProcess, WorkerPool

from queues import rqcompat
from queues.catalog.lookup import OptimaJob, OptimaQueue
from queues.connection import servers
from queues.connection.clients import describe, get_connection
from queues.connection.outage import Backoff, OutageLog, wait_until_reachable
from queues.management.commands.rqworker import (
    async_jobs,
    build_worker,
    parse_concurrency,
    run_worker,
    start_command,
)
from queues.worker import options as config
from queues.worker.adapter import OptimaWorker
from queues.worker.asyncworker import OptimaAsyncWorker
from queues.worker.concurrent import OptimaConcurrentWorker
from queues.worker.kernel import die_with_parent

# Seconds the master waits, beyond the grace, for its members to stop before it SIGKILLs them. A
# member needs a few seconds after the grace (kill the horse, put the job back, unregister); the
# supervisor's own stop timeout (grace + 15 s, docs/operations.md) must outlast this.
STOP_MARGIN_SECONDS = 10

logger = logging.getLogger("rq.worker")


def serve_member(master_pid, name, names, grace, work_kwargs, concurrency=1, on_loop=False):
    """A member's whole life, in the forked child: rqworker's build-and-work loop (``concurrency`` > 1:
    an OptimaConcurrentWorker running that many jobs at once; ``on_loop``: an OptimaAsyncWorker, --async)."""
    die_with_parent(master_pid)
    # The fork inherited the master's handlers (WorkerPool.request_stop would signal this member's
    # siblings); until the worker installs its own in bootstrap, a stop signal just ends the member:
    # it holds no job yet.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    outage = OutageLog(logging.getLogger("rq.worker"), f"Pool member {name} (Redis at {describe()})")
    backoff = Backoff(config.options().redis_retry_max)
    if on_loop:
        build = {"worker_class": OptimaAsyncWorker, "concurrency": concurrency}
    elif concurrency > 1:
        build = {"worker_class": OptimaConcurrentWorker, "concurrency": concurrency}
    else:
        build = {"worker_class": OptimaWorker}
    worker = run_worker(
        lambda: build_worker(names, grace, outage, backoff, name=name, **build),
        outage,
        backoff,
        **work_kwargs,
    )
    if not (rqcompat.stop_requested(worker) or work_kwargs["burst"]):
        sys.exit(1)  # rq's loop ended on an unexpected exception (logged): the master forks a new member


class OptimaWorkerPool(WorkerPool):
    """rq's WorkerPool running ``serve_member`` in each member instead of rq's ``run_worker``."""

    def __init__(self, names, *, num_workers, grace, with_scheduler, logging_level, concurrency=1, on_loop=False):
        # rq's pool only keeps ``connection`` to rebuild it in its own run_worker, which we do not
        # use: members connect through django-rq's settings, as rqworker does. Its queues' server (one:
        # start_command refused queues of two, queues/connection/servers.py).
        self.server = servers.of_queue(names[0])
        super().__init__(
            names,
            connection=get_connection(self.server),
            num_workers=num_workers,
            worker_class=OptimaWorker,
            serializer=JSONSerializer,
            job_class=OptimaJob,
            queue_class=OptimaQueue,
        )
        self.names = list(names)
        self.concurrency = concurrency
        self.on_loop = on_loop
        self.grace = grace
        self.with_scheduler = with_scheduler
        self.logging_level = logging_level
        self.master_pid = os.getpid()
        self.stop_deadline = None
        self.forwarded_signal = signal.SIGTERM
        self.killed = 0  # members SIGKILLed for outliving the stop deadline

    def get_worker_process(self, name, burst, _sleep=0, logging_level="INFO"):
        # rq's target (rq.worker_pool.run_worker) builds the worker without shutdown_grace, always
        # with the scheduler, and without die_with_parent or the wait for Redis at start.
        return ForkProcess(
            target=serve_member,
            name=f"Worker {name} (WorkerPool {self.name})",
            args=(
                self.master_pid,
                name,
                self.names,
                self.grace,
                {"burst": burst, "with_scheduler": self.with_scheduler, "logging_level": self.logging_level},
                self.concurrency,
                self.on_loop,
            ),
        )

    def start_worker(self, count=None, burst=True, _sleep=0, logging_level="INFO"):
        if self.status == self.Status.STOPPED:
            return  # rq's respawn loop may be mid-way when the stop signal arrives
        gc.freeze()  # everything the master holds now stays out of the members' collections
        super().start_worker(count, burst, _sleep, logging_level)
        if self.status == self.Status.STOPPED:  # the signal came during the fork: this one missed it
            self.stop_worker(self.worker_dict[list(self.worker_dict)[-1]])

    def request_stop(self, signum=None, frame=None):
        # rq's waits for ever; a member stops within its grace plus a few seconds.
        if self.stop_deadline is None:
            self.stop_deadline = time.monotonic() + self.grace + STOP_MARGIN_SECONDS
        self.forwarded_signal = signum or signal.SIGTERM
        super().request_stop(signum, frame)

    def stop_worker(self, worker_data, sig=None):
        # rq always sends SIGINT; pass on the signal the master got, so that the members' logs say it.
        super().stop_worker(worker_data, sig or self.forwarded_signal)

    def all_workers_have_stopped(self):
        stopped = super().all_workers_have_stopped()
        if not stopped and self.stop_deadline is not None and time.monotonic() >= self.stop_deadline:
            for data in list(self.worker_dict.values()):
                self.log.error(
                    "Member %s (pid %d) still running %g s after the stop signal: killing it; "
                    "its job takes the abandoned-job path",
                    data.name,
                    data.pid,
                    self.grace + STOP_MARGIN_SECONDS,
                )
                self.stop_worker(data, sig=signal.SIGKILL)
                data.process.join(5)
                self.killed += 1
            stopped = super().all_workers_have_stopped()
        return stopped

    def handle_dead_worker(self, worker_data):
        if self.status != self.Status.STOPPED and worker_data.process.exitcode != 0:
            self.log.warning(
                "Member %s (pid %d) exited with status %s; starting another",
                worker_data.name,
                worker_data.pid,
                worker_data.process.exitcode,
            )
        super().handle_dead_worker(worker_data)


class Command(BaseCommand):
    help = "Runs N OptimaWorkers forked from one process on the given declared queues (default: all of them)."
    requires_system_checks = []  # WORKER_CHECK_TAGS instead (see rqworker), in handle()

    def add_arguments(self, parser):
        parser.add_argument("args", nargs="*", help="Queues to work on, in priority order (default: all declared).")
        parser.add_argument(
            "--num-workers",
            dest="num_workers",
            type=int,
            default=1,
            help="Number of worker processes (members) to run (default 1).",
        )
        parser.add_argument(
            "--grace",
            dest="grace",
            default=None,
            help="Seconds a stopping member lets its running job finish before putting it back in its queue "
            "(default: OPTIMA_QUEUES_OPTIONS['SHUTDOWN_GRACE_SECONDS'], 25). The supervisor's stop "
            "timeout must be longer: see docs/operations.md.",
        )
        parser.add_argument(
            "--without-scheduler",
            action="store_true",
            dest="without_scheduler",
            help="Do not run RQ's scheduler in the members (delayed jobs need one somewhere).",
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            dest="burst",
            help="Members exit once the queues are empty; the pool exits when they all have.",
        )
        parser.add_argument("--pid", dest="pid", default=None, help="File to write the master's pid into.")
        parser.add_argument(
            "--concurrency",
            dest="concurrency",
            default=None,
            help="Jobs each member runs at once, each in a thread (default 1: forking members, one job at a time). "
            "N > 1: every member is a fork-free queues.worker.OptimaConcurrentWorker; docs/operations.md.",
        )
        parser.add_argument(
            "--async",
            dest="async_jobs",
            default=None,
            help="Jobs each member runs at once, async def ones as coroutines of one event loop, plain functions "
            "each in a thread: every member is a fork-free queues.worker.OptimaAsyncWorker (not with "
            "--concurrency); docs/operations.md.",
        )

    def handle(self, *args, **options):
        if options["num_workers"] < 1:
            raise CommandError(
                f"--num-workers must be an integer >= 1, got {options['num_workers']}. Example: --num-workers 4"
            )
        on_loop = async_jobs(options)  # None, or --async N (refused with --concurrency)
        concurrency = on_loop if on_loop is not None else parse_concurrency(options["concurrency"])
        names, grace, level = start_command(self, args, options)
        if not self._wait_for_redis(servers.of_queue(names[0])):  # its queues' server: one, start_command says
            return  # stopped while waiting
        # (the job modules were imported when Django started: queues.catalog.jobs.autodiscover, shared by members)
        reset_db_connections()  # no database connection may be shared with the members
        pool = OptimaWorkerPool(
            names,
            num_workers=options["num_workers"],
            grace=grace,
            with_scheduler=not options["without_scheduler"],
            logging_level=level,
            concurrency=concurrency,
            on_loop=on_loop is not None,
        )
        pool.start(burst=options["burst"], logging_level=level)
        if pool.killed:
            sys.exit(1)

    def _wait_for_redis(self, server):
        """True once Redis answers; False if a stop signal came first. (Members would wait for it
        too, each with its own log lines: the master waits once, before forking any.)"""
        stop = []
        previous = {
            sig: signal.signal(sig, lambda signum, frame: stop.append(signum))
            for sig in (signal.SIGTERM, signal.SIGINT)
        }
        connection = get_connection(server)
        outage = OutageLog(logger, f"rqworker-pool (Redis at {describe(server=server)})")
        try:
            return wait_until_reachable(
                connection, Backoff(config.options().redis_retry_max), outage, should_stop=lambda: bool(stop)
            )
        finally:
            connection.connection_pool.disconnect()  # no socket shared with the members
            for sig, handler in previous.items():
                signal.signal(sig, handler)
