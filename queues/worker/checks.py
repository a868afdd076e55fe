"""System checks of the resilience options (ids queues.E060, queues.E061, queues.E062; docs/checks.md)."""

from django.core.checks import Tags, register

from queues.conf import check_messages
from queues.worker import options as config


@register(Tags.compatibility)
def check_resilience_options(app_configs=None, **kwargs):
    return check_messages(config.problems())
