"""Access to the feature API (kept apart from ``features.api``: DRF imports it while loading itself)."""

from django.conf import settings
from rest_framework.permissions import BasePermission


def dev_mode():
    """True in local development (OPTIMA_ENV=dev), read per request so tests can flip it.

    Without the setting at all: not dev (safe by default, as the settings treat an unset OPTIMA_ENV).
    """
    return getattr(settings, "OPTIMA_ENV", "prod") == "dev"


class IsAuthenticatedOutsideDev(BasePermission):
    """Session or token authentication, except in dev where the endpoints are open."""

    message = "Authentication required: send 'Authorization: Token <key>' or log in (session)."

    def has_permission(self, request, view):
        if dev_mode():
            return True
        return bool(request.user and request.user.is_authenticated)
