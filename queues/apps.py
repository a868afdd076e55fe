from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # System checks register on import: queues.E0xx (conf), E030-E035 (schedules),
        # E050-E053 (metrics, via metrics.install), E060/E061 (worker options), W020 (panel).
        from . import checks, metrics, registry, schedules  # noqa: F401
        from .board import access as board_access
        from .resilience import checks as resilience_checks  # noqa: F401

        metrics.install()  # /metrics collector + the worker-side recorder (queues/metrics/)
        board_access.log_startup_problems()  # QUEUE_BOARD_USER/PASSWORD half set: WARN (queues.W020)
        try:
            registry.install_rq_queues()
        except ImproperlyConfigured:
            # Reported, with every other problem, by the system checks (manage.py check).
            pass
