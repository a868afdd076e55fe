"""System checks of the resilience options (ids queues.E060, queues.E061; docs/checks.md)."""
from django.core.checks import Error, Tags, register

from queues.worker import options as config


@register(Tags.compatibility)
def check_resilience_options(app_configs=None, **kwargs):
    return [Error(msg, hint=hint, id=id_) for id_, msg, hint in config.problems()]
