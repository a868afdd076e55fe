"""System check of the tracing setting: queues.E090 (``QUEUE_TRACE_PARENT`` not "link" or "child")."""

from django.core.checks import Tags, register

from queues.conf import check_messages
from queues.tracing import setup


@register(Tags.compatibility)
def check_trace_parent(app_configs=None, **kwargs):
    return check_messages(setup.validate())
