from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
        from . import schedules  # noqa: F401  (registers the periodic jobs' system check)
        from .resilience import checks as _resilience_checks  # noqa: F401  (queues.E060/E061)
        from . import metrics, registry

        metrics.install()  # /metrics collector + the worker-side recorder (queues/metrics/)
        from .board import access as board_access

        board_access.log_startup_problems()  # QUEUE_BOARD_USER/PASSWORD half set: WARN (queues.W020)

        try:
            registry.install_rq_queues()
        except ImproperlyConfigured:
            # Reported, with every other problem, by the system checks (manage.py check).
            pass
