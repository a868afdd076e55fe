from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
        from . import metrics, registry

        metrics.install()  # /metrics collector + the worker-side recorder (queues/metrics/)

        try:
            registry.install_rq_queues()
        except ImproperlyConfigured:
            # Reported, with every other problem, by the system checks (manage.py check).
            pass
