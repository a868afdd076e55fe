"""System check of the METRICS_* options (ids queues.E050-E053, listed in docs/metrics.md)."""
from django.core.checks import Error, Tags, register

from queues import conf
from queues.metrics import store


@register(Tags.compatibility)
def check_metrics_options(app_configs=None, **kwargs):
    return [Error(msg, hint=hint, id=id_) for id_, msg, hint in store.validate_options(conf.options())]
