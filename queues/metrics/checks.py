"""System check of the METRICS_* options (ids queues.E050-E055, listed in docs/metrics.md)."""

from django.core.checks import Tags, register

from queues import conf
from queues.metrics import store


@register(Tags.compatibility)
def check_metrics_options(app_configs=None, **kwargs):
    return conf.check_messages(store.validate_options(conf.options()))
