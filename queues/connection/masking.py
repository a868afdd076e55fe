"""Error pages without secrets: ``MaskingExceptionReporterFilter`` (``DEFAULT_EXCEPTION_REPORTER_FILTER``)
and ``MaskingExceptionReporter`` (``DEFAULT_EXCEPTION_REPORTER``).

Settings name them as ``queues.connection.MaskingExceptionReporterFilter`` and
``queues.connection.MaskingExceptionReporter``: the filter masks settings, ``request.META``, cookies,
POST values and the traceback's locals; the reporter what Django hands the page without asking the
filter (the exception's message, its causes, the request's URL, path and GET values). Both are
needed: with the filter alone an exception message or a GET value still shows a password.

``mask_urls_in`` masks the password of every URL inside a text: the authority's, and any query
parameter whose name, percent-decoded as redis-py decodes it (``?pass%77ord=`` is its ``password``),
names a secret (``secret_name``: pass, pwd, secret, token, key, auth...); a URL percent-encoded inside
the text (a query value) is decoded to be checked. A single Redis URL is masked by
``queues.connection.factory.mask_url``, with the same rule.
"""

import re
from collections.abc import Mapping
from urllib.parse import unquote, unquote_plus

from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

# scheme://user:password@ anywhere in a string: the password part (up to the last @ of the authority,
# as an unencoded @ in a password would leave it) is replaced.
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]*:)[^\s/]+@")
# ...and a query parameter whose name, decoded, looks like a secret: redis-py percent-decodes the names
# (``?pass%77ord=`` is its ``password``) and reads ``?password=`` and ``?ssl_password=``; ``?passwd=``,
# ``?pwd=``, ``?token=``... are masked as well, whoever reads them.
_QUERY_NAME = re.compile(r"[?&](?P<name>[^\s=&#?]*)=")  # a parameter's head; its value runs to & # or a space
_VALUE_END = re.compile(r"[\s&#]|$")
_SECRET_NAME = re.compile(r"pass|pwd|secret|token|key|auth|signature|credential", re.IGNORECASE)  # Django's, and pwd
_DECODINGS = 4  # percent-decodings tried on a text: a URL encoded inside a query, itself encoded...
_MAX_DEPTH = 8  # containers nested deeper than this are not shown at all on an error page


def secret_name(name):
    """True when a query parameter's ``name`` names a secret once decoded as a URL parser decodes it."""
    decoded = name
    for _ in range(_DECODINGS):
        if _SECRET_NAME.search(decoded):
            return True
        again = unquote_plus(decoded)
        if again == decoded:
            return False
        decoded = again
    return bool(_SECRET_NAME.search(decoded))


def _mask_query(text):
    """Every secret-named parameter's value masked, also one inside another's value (``?next=redis://h/0
    ?password=...``: the heads are found first, the values after)."""
    out, done = [], 0
    for head in _QUERY_NAME.finditer(text):
        if head.end() <= done or not secret_name(head["name"]):
            continue
        end = _VALUE_END.search(text, head.end()).start()
        out.append(text[done : head.end()] if head.start() >= done else "")
        out.append("***")
        done = end
    return "".join(out) + text[done:] if out else text


def _mask_plain(text):
    return _mask_query(_URL_PASSWORD.sub(r"\g<head>***@", text))


def mask_urls_in(text):
    """``text`` with the password of every URL in it replaced by ``***``: the authority's, and any query
    parameter whose decoded name looks secret. A URL percent-encoded inside the text (a URL given as a
    query value: ``?next=redis%3A%2F%2Fh%2F0%3Fpassword%3D...``, once or more) that hides a password is
    shown decoded, masked."""
    shown = probe = _mask_plain(text)
    for _ in range(_DECODINGS):
        if "%" not in probe:
            break
        decoded = unquote(probe)
        if decoded == probe:
            break
        probe = decoded
        masked = _mask_plain(probe)
        if masked != probe:
            shown = probe = masked
    return shown


def _mask_bytes(value):
    text = bytes(value).decode("utf-8", "surrogateescape")
    masked = mask_urls_in(text)
    return value if masked == text else type(value)(masked.encode("utf-8", "surrogateescape"))


class _Shown:
    """A local shown by a masked ``repr`` (an exception, a request, any object whose repr holds a URL)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


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

    def get_safe_cookies(self, request):
        return {k: self.cleanse_variable(k, v, set(), 0) for k, v in super().get_safe_cookies(request).items()}

    def get_post_parameters(self, request):
        """Django's (``sensitive_post_parameters`` applied), every value masked as a local is."""
        return {k: self.cleanse_variable(k, v, set(), 0) for k, v in super().get_post_parameters(request).items()}

    def get_traceback_frame_variables(self, request, tb_frame):
        return [
            (name, self.cleanse_variable(name, value, set(), 0))
            for name, value in super().get_traceback_frame_variables(request, tb_frame)
        ]

    def _looks_secret(self, name):
        return isinstance(name, str) and bool(self.hidden_settings.search(name) or _SECRET_NAME.search(name))

    def cleanse_variable(self, name, value, seen, depth):
        """``value`` as it may be shown: a copy with secrets masked (the frame's own objects untouched)."""
        if self._looks_secret(name):
            return self.cleansed_substitute
        try:
            # Only the exact type: isinstance() would evaluate a lazy object (request.user) to answer.
            kind = type(value)
            if issubclass(kind, str):
                return mask_urls_in(value)
            if issubclass(kind, (bytes, bytearray)):
                return _mask_bytes(value)
            if not issubclass(kind, (Mapping, list, tuple, set, frozenset)):
                return self._masked_object(value)
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

    @staticmethod
    def _masked_object(value):
        """``value``, or a stand-in showing its repr masked when that repr holds a URL password (an
        exception whose message names the URL, a request whose query holds one)."""
        try:
            shown = repr(value)
        except Exception:  # noqa: BLE001 — Django's own pprint reports a repr that raises
            return value
        masked = mask_urls_in(shown)
        return value if masked == shown else _Shown(masked)


class MaskingExceptionReporter(ExceptionReporter):
    """Django's technical 500 (the page DEBUG shows, the text of the error mail), with what the filter
    cannot reach masked too: the exception's message and notes, the exceptions it was caused by, the
    request's URL and path, and its GET parameters. Set ``DEFAULT_EXCEPTION_REPORTER`` to this class."""

    def get_traceback_data(self):
        data = super().get_traceback_data()
        if "exception_value" in data:
            data["exception_value"] = mask_urls_in(data["exception_value"])
        if "exception_notes" in data:
            data["exception_notes"] = mask_urls_in(data["exception_notes"])
        for frame in data.get("frames", ()):
            if frame.get("exc_cause") is not None:
                frame["exc_cause"] = mask_urls_in(str(frame["exc_cause"]))
        if self.request is not None:
            cleanse = MaskingExceptionReporterFilter().cleanse_variable
            data["request_GET_items"] = [(k, cleanse(k, v, set(), 0)) for k, v in self.request.GET.items()]
            data["request_insecure_uri"] = mask_urls_in(data["request_insecure_uri"])
            data["request"] = _MaskedRequest(self.request)
        return data


class _MaskedRequest:
    """The request as the error page reads it: its ``path_info`` masked, the rest its own."""

    def __init__(self, request):
        self._request = request
        self.path_info = mask_urls_in(request.path_info)

    def __getattr__(self, name):
        return getattr(self._request, name)
