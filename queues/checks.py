"""System checks of the queue configuration. Every id is listed in docs/checks.md.

They report ``queues.conf.validate()``'s problems: the same validator that refuses a broken
configuration at first use, so the messages match.
"""
from django.core.checks import Error, Tags, Warning, register

from . import conf


@register(Tags.compatibility)
def check_queue_settings(app_configs=None, **kwargs):
    result = []
    for problem in conf.validate():
        cls = Error if problem.level == "error" else Warning
        result.append(cls(problem.msg, hint=problem.hint or None, id=problem.id))
    return result
