"""System checks of the resilience options (ids queues.E060, queues.E061, queues.E062, queues.W063;
docs/checks.md)."""

from django.core.checks import Tags, register

from queues.conf import check_messages
from queues.jobs import execution
from queues.worker import options as config


@register(Tags.compatibility)
def check_resilience_options(app_configs=None, **kwargs):
    return check_messages(config.problems())


@register("redis")
def check_execution_records(app_configs=None, **kwargs):
    """queues.W063: RQ_EXECUTION_RECORDS is False while workers of a release up to 6f24d7d run jobs on the
    queues' Redis (queues/jobs/execution.py). Reads each server's started registries with /healthz's short
    timeout; an unreachable server reports nothing here."""
    return check_messages(execution.validate())
