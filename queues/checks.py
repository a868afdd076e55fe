"""System checks of the queue configuration. Every id is listed in docs/checks.md.

They report ``queues.declarations.validate()``'s problems: the same validator that refuses a
broken configuration at first use, so the messages match. django-rq's wiring in settings
(``queues.connection.validate_django_rq()``) is checked here only: a queue works without it.
"""
from django.core.checks import Error, Tags, Warning, register

from . import connection, declarations


@register(Tags.compatibility)
def check_queue_settings(app_configs=None, **kwargs):
    result = []
    for problem in declarations.validate() + connection.validate_django_rq():
        cls = Error if problem.level == "error" else Warning
        result.append(cls(problem.msg, hint=problem.hint or None, id=problem.id))
    return result


@register(Tags.security)
def check_queue_board_auth(app_configs=None, **kwargs):
    """queues.W020: only one of QUEUE_BOARD_USER / QUEUE_BOARD_PASSWORD is set (queues/board/access.py)."""
    from .board.access import validate_basic_auth

    return [Warning(p.msg, hint=p.hint or None, id=p.id) for p in validate_basic_auth()]
