from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # System checks register on import: queues.E001-E010 (checks), E030-E037 (periodic/declare),
        # E050-E053 (metrics, via metrics.install), E060/E061 (worker options), W020 (panel).
        from queues import checks, metrics  # noqa: F401
        from queues.board import access as board_access
        from queues.catalog import jobs as catalog
        from queues.periodic import declare  # noqa: F401
        from queues.worker import checks as resilience_checks  # noqa: F401

        catalog.autodiscover()  # each app's jobs module + QUEUE_JOB_MODULES: the declared jobs
        metrics.install()  # /metrics collector + the worker-side recorder (queues/metrics/)
        board_access.log_startup_problems()  # QUEUE_BOARD_USER/PASSWORD half set: WARN (queues.W020)
        # django-rq is wired in settings (RQ, RQ_QUEUES = queues.connection.RQQueuesSetting()):
        # nothing here rewrites settings; queues.E009/E010 say when that wiring is missing.
