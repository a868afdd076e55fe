"""The app config, and rq's key prefix arranged before anything imports rq.

rq 3.0 reads its key prefix from the ``RQ_KEY_PREFIX`` environment variable once, when it is first
imported (``rq/defaults.py``), and bakes it into class attributes all over rq. Django imports this module
while it populates the app registry (settings are loaded by then), before the apps listed after
``queues`` (``django_rq`` imports rq): so ``QUEUE_PREFIX`` becomes rq's prefix here, and no project has to
export anything before its imports. Child processes (work horses, subprocesses) inherit ``os.environ``.
If rq was imported earlier, it is too late to change its prefix: nothing is written, and check queues.E006
says how to fix the order when the prefixes differ. A test run (``manage.py test``, pytest-django) first gets
a prefix of its own here (queues/testing.py, ``isolate_test_run``).
"""

import os
import sys

from django.apps import AppConfig
from django.core.signals import setting_changed

from queues import conf, testing  # leaves: they import nothing of rq
from queues.catalog import jobs as job_catalog  # a leaf too: it imports nothing of rq, nor of Django


def arrange_rq_key_prefix():
    """Export ``settings.QUEUE_PREFIX`` as ``RQ_KEY_PREFIX`` unless rq is imported already (see above).
    A prefix that is not a string is left to check queues.E001."""
    prefix = conf.prefix()
    if "rq" not in sys.modules and isinstance(prefix, str):
        os.environ["RQ_KEY_PREFIX"] = prefix


def forget_job_modules(*, setting, **kwargs):
    """``setting_changed``: the job modules are discovered again after ``INSTALLED_APPS`` or ``QUEUE_JOB_MODULES``
    change. ``override_settings(INSTALLED_APPS=...)`` runs every app's ``ready()`` again (so ``catalog.autodiscover``
    with the app it adds) but not when it ends: the discovery made with the added app outlived the override, and
    its ``jobs`` package's functions stayed declared jobs for the rest of the process."""
    if setting in ("INSTALLED_APPS", "QUEUE_JOB_MODULES"):
        job_catalog.forget_discovery()


testing.isolate_test_run()  # manage.py test / pytest-django: a prefix of the run's own (queues/testing.py)
arrange_rq_key_prefix()


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # System checks register on import: queues.E001-E010, E021-E026, E028, E029, W027, E040-E043, E059, E070,
        # W071, W082, E120, W020, E130-E133 (checks, with the validators of conf, connection, board, catalog,
        # jobs/signing, tasks, logs/formats), E030-E039 (periodic/declare), E050-E055 (metrics, via
        # metrics.install), E060-E062, W063 (worker options), E090 (tracing); E080/E081, E083-E086 are the Tasks
        # backend's own check (tasks/backend.py), run by Django's tasks framework.
        from queues import checks, metrics, rqcompat  # noqa: F401
        from queues.board import access as board_access
        from queues.catalog import jobs as catalog
        from queues.events import hooks
        from queues.events.signals import SignalsHook
        from queues.jobs import state
        from queues.logs.hook import LogsHook
        from queues.metrics.hook import MetricsHook
        from queues.periodic import declare  # noqa: F401
        from queues.producer import limits, outbox
        from queues.tracing import checks as tracing_checks  # noqa: F401
        from queues.tracing import setup as tracing_setup
        from queues.tracing.hook import TracingHook
        from queues.worker import checks as resilience_checks  # noqa: F401
        from queues.workflows.hook import BatchesHook

        setting_changed.connect(forget_job_modules, dispatch_uid="queues.forget_job_modules")
        rqcompat.memoize_serializer_lookup()  # ~0.2 ms of CPU per job on Python 3.11 (rqcompat.py says why)
        catalog.add_app_module("queues.workflows.steps")  # a chain's own job: its next step (docs/workflows.md)
        catalog.autodiscover()  # each app's jobs module + QUEUE_JOB_MODULES: the declared jobs
        metrics.install()  # /metrics collector + the worker-side recorder (queues/metrics/)
        # The worker's concerns, called at each point of a job's life (queues/events/hooks.py), in this
        # order: the job's log line, its metrics, the signals feature code hears, its span, its batch.
        hooks.install(LogsHook(), MetricsHook(), SignalsHook(), TracingHook(), BatchesHook())
        # A job's state reads the producer's outbox and limit keys; jobs/ imports nothing of producer/.
        state.install(state.Producer(waiting=outbox.waiting, stored_meta=outbox.stored_meta, hold_of=limits.hold_of))
        tracing_setup.from_env()  # OpenTelemetry when OTEL_* or the process's own provider says so (docs/tracing.md)
        board_access.log_startup_problems()  # QUEUE_BOARD_USER/PASSWORD half set: WARN (queues.W020)
        # django-rq is wired in settings (RQ, RQ_QUEUES = queues.connection.RQQueuesSetting()):
        # nothing here rewrites settings; queues.E009/E010 say when that wiring is missing.
