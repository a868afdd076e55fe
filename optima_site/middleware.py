"""The site's 503 page: a database that does not answer gives ``templates/503.html``, not a 500.

The queue panel (``queues.board.access.guard``) and the feature API (``features.api``) answer their own 503s;
this covers the rest of the site (the admin's pages, its sign-in). Django's ``OperationalError`` and
``InterfaceError`` are what a locked SQLite past its timeout or an unreachable PostgreSQL raise. With
``DEBUG`` on, Django's technical 500 page stays: it shows a developer which error it was (a missing table
raises ``OperationalError`` too).
"""

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.template.response import SimpleTemplateResponse

logger = logging.getLogger("optima_site")

RETRY_AFTER_SECONDS = 5


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if settings.DEBUG or not isinstance(exception, (OperationalError, InterfaceError)):
            return None
        logger.warning(
            "%s %s: database unavailable (%s: %s): 503",
            request.method,
            request.path,
            type(exception).__name__,
            str(exception).splitlines()[0] if str(exception) else "",
        )
        # No request context: the context processors would read the user, from the database.
        response = SimpleTemplateResponse("503.html", status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response.render()
