"""Error pages without secrets: ``MaskingExceptionReporterFilter`` (``DEFAULT_EXCEPTION_REPORTER_FILTER``).

Settings name it as ``queues.connection.MaskingExceptionReporterFilter``. ``mask_urls_in`` masks the
password of every URL inside a text (in the authority or the query); a single Redis URL is masked by
``queues.connection.factory.mask_url``.
"""

import re
from collections.abc import Mapping

from django.views.debug import SafeExceptionReporterFilter

# scheme://user:password@ anywhere in a string: the password part (up to the last @ of the authority,
# as an unencoded @ in a password would leave it) is replaced.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)[^\s/]+@")
# ...and a query parameter named like a password (redis-py reads ``?password=`` and ``?ssl_password=``).
_QUERY_PASSWORD = re.compile(r"(?P<head>[?&][^\s=&#?]*password=)[^\s&#]*", re.IGNORECASE)
_MAX_DEPTH = 8  # containers nested deeper than this are not shown at all on an error page


def mask_urls_in(text):
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _QUERY_PASSWORD.sub(r"\g<head>***", _URL_PASSWORD.sub(r"\g<head>***@", text))


class MaskingExceptionReporterFilter(SafeExceptionReporterFilter):
    """Django's filter, plus: no password or secret-looking value reaches an error page, in dev too.

    Django hides settings and ``request.META`` entries whose *name* looks secret (``hidden_settings``:
    API, AUTH, TOKEN, KEY, SECRET, PASS, SIGNATURE) and nothing else. This filter also masks:

    - the password of any URL inside a string value (``QUEUES_REDIS_URL``, a cache ``LOCATION``,
      ``DATABASE_URL`` in ``request.META`` or in a WSGI ``environ``);
    - in the traceback's local variables, whatever DEBUG says: a variable whose name looks secret,
      any dict entry whose key looks secret (a connection's ``settings_dict['PASSWORD']``), at any
      depth of dicts, lists, tuples and sets, and URL passwords in strings.

    Set ``DEFAULT_EXCEPTION_REPORTER_FILTER`` to this class.
    """

    def cleanse_setting(self, key, value):
        value = super().cleanse_setting(key, value)
        if isinstance(value, str):
            return mask_urls_in(value)
        return value

    def get_safe_request_meta(self, request):
        return {
            k: (mask_urls_in(v) if isinstance(v, str) else v) for k, v in super().get_safe_request_meta(request).items()
        }

    def get_traceback_frame_variables(self, request, tb_frame):
        return [
            (name, self.cleanse_variable(name, value, set(), 0))
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]

    def _looks_secret(self, name):
        return isinstance(name, str) and bool(self.hidden_settings.search(name))

    def cleanse_variable(self, name, value, seen, depth):
        """``value`` as it may be shown: a copy with secrets masked (the frame's own objects untouched)."""
        if self._looks_secret(name):
            return self.cleansed_substitute
        try:
            # Only the exact type: isinstance() would evaluate a lazy object (request.user) to answer.
            kind = type(value)
            if issubclass(kind, str):
                return mask_urls_in(value)
            if not issubclass(kind, (Mapping, list, tuple, set, frozenset)):
                return value
        except Exception:  # pragma: no cover - type() and issubclass() of builtins do not raise
            return value
        if id(value) in seen:
            return "<recursion>"
        if depth >= _MAX_DEPTH:
            return f"<{type(value).__name__} nested deeper than {_MAX_DEPTH} levels: not shown>"
        seen = seen | {id(value)}
        try:
            if isinstance(value, Mapping):
                return {k: self.cleanse_variable(k, v, seen, depth + 1) for k, v in value.items()}
            items = [self.cleanse_variable("", v, seen, depth + 1) for v in value]
        except Exception as exc:  # a broken container must not break the error page
            return f"<{type(value).__name__} not shown: {type(exc).__name__} while reading it>"
        if isinstance(value, list):
            return items
        if isinstance(value, tuple):
            return tuple(items)
        return items  # a set's items as a list: masked values may be unhashable or collide
