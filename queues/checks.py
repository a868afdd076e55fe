"""System checks of the queue configuration. Every id is listed in docs/checks.md.

They report ``queues.catalog.queues.validate()``'s problems: the same validator that refuses a
broken configuration at first use, so the messages match. django-rq's wiring in settings
(``queues.connection.djangorq.validate_django_rq()``) is checked here only: a queue works without it.
Each validator returns ``conf.Problem``s; ``conf.check_messages`` turns them into Django's messages.
"""

from django.core.checks import Tags, register

from queues import tasks
from queues.board import bounded, live, throttle
from queues.board.access import validate_basic_auth, validate_password_length
from queues.catalog import jobs as catalog
from queues.catalog import queues as declarations
from queues.conf import check_messages
from queues.connection import djangorq, failover, servers
from queues.connection import info as redisinfo
from queues.jobs import signing
from queues.logs import formats


@register(Tags.compatibility)
def check_queue_settings(app_configs=None, **kwargs):
    return check_messages(
        declarations.validate() + djangorq.validate_django_rq() + failover.validate() + servers.validate()
    )


@register(Tags.security)
def check_queue_board_auth(app_configs=None, **kwargs):
    """The queue panel's access and the sign-in throttle (queues/board/access.py, queues/board/throttle.py):

    - queues.W020: only one of QUEUE_BOARD_USER / QUEUE_BOARD_PASSWORD is set;
    - queues.E021: QUEUE_BOARD_PASSWORD shorter than 16 characters in stage/prod;
    - queues.E022: QUEUE_LOGIN_FAILURES is not a rate; queues.E023: a bad QUEUE_TRUSTED_PROXIES entry;
    - queues.E024: QUEUE_BOARD_REDIS_TIMEOUT / QUEUE_BOARD_DEADLINE not a number of seconds > 0;
    - queues.E029: QUEUE_BOARD_REFRESH_SECONDS not a whole number of seconds from 0 to 3600 (board/live.py).
    """

    return check_messages(
        validate_basic_auth() + validate_password_length() + throttle.validate() + bounded.validate() + live.validate()
    )


@register(Tags.security)
def check_trust_boundary(app_configs=None, **kwargs):
    """Declared and signed jobs (queues/catalog/jobs.py, queues/jobs/signing.py): queues.E025 (a QUEUE_JOB_MODULES
    module cannot be imported), queues.E026 / W027 (QUEUE_ACCEPT_UNSIGNED_UNTIL not a time / far
    ahead), queues.E028 (a signing key shorter than 32 characters)."""

    return check_messages(catalog.validate() + signing.validate())


@register(Tags.compatibility)
def check_tasks_backend(app_configs=None, **kwargs):
    """queues.W082: TASKS names queues.tasks.QueuesBackend without 'django_tasks' installed (queues/tasks/)."""
    return check_messages(tasks.validate())


@register("redis")
def check_redis_eviction(app_configs=None, **kwargs):
    """The queues' Redis must not evict keys (queues/connection/info.py): queues.E070 (an ``allkeys-*``
    maxmemory-policy: waiting jobs can be deleted), queues.W071 (``volatile-*``: keys with a TTL can be).
    Reads ``INFO memory`` with /healthz's short timeout; an unreachable Redis reports nothing here."""

    return check_messages(redisinfo.validate())


@register(Tags.compatibility)
def check_log_format(app_configs=None, **kwargs):
    """queues.E120: QUEUES_LOG_FORMAT is not 'plain' or 'json' (queues/logs/formats.py)."""

    return check_messages(formats.validate())
