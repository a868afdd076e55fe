"""HTTP client of the marketplace API, and how its failures map onto the job lifecycle.

==========================  ===========================================  ===========================
answer                      raised                                       what the queues do
==========================  ===========================================  ===========================
2xx                         (the decoded JSON)                           -
429 + Retry-After           ``Throttled`` (a ``queues.RetryAfter``)      next attempt after that delay
5xx, timeout, network       ``MarketplaceUnavailable``                   retried with the backoff
other 4xx                   ``MarketplaceRejected`` (``PermanentError``)  dead letter at once
2xx with a body not JSON    ``MarketplaceUnavailable``                   retried with the backoff
==========================  ===========================================  ===========================

Every request first takes a slot of the per-cabinet rate limiter (``ratelimit.py``). Connect and
read timeouts come from ``features.conf``. The token is sent as a bearer header and appears in
no message.
"""

import datetime as dt
import email.utils
import math

import queues

from .. import conf
from .ratelimit import CabinetRateLimiter


class MarketplaceError(Exception):
    """Base class of the client's errors."""


class MarketplaceUnavailable(MarketplaceError):
    """5xx, timeout or network error: transient, so the job is retried with the queue's backoff."""


class MarketplaceRejected(queues.PermanentError, MarketplaceError):
    """A 4xx other than 429: the request itself is wrong, retrying cannot help."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


class Throttled(queues.RetryAfter, MarketplaceError):
    """429: the marketplace said when to come back."""


def retry_after_seconds(value, *, default=1.0, maximum=None, now=None):
    """Seconds to wait from a ``Retry-After`` header value (delta-seconds or an HTTP date).

    Missing or unparseable -> ``default``; negative or past -> 0; longer than ``maximum`` seconds
    -> ``maximum`` (a marketplace asking for a day must not park a job for a day unnoticed).
    """
    maximum = conf.get("MARKETPLACE_RETRY_AFTER_MAX") if maximum is None else maximum
    seconds = None
    if value is not None:
        value = value.strip()
        try:
            seconds = float(value)
            if not math.isfinite(seconds):
                seconds = None
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=dt.UTC)
                now = now or dt.datetime.now(dt.UTC)
                seconds = (when - now).total_seconds()
    if seconds is None:
        seconds = default
    return min(max(0.0, seconds), maximum)


class MarketplaceClient:
    """``with MarketplaceClient() as client: client.orders(cabinet_id)``."""

    def __init__(self, base_url=None, *, token=None, connect_timeout=None, read_timeout=None, limiter=None):
        self.base_url = (base_url or conf.get("MARKETPLACE_URL")).rstrip("/")
        token = conf.get("MARKETPLACE_TOKEN") if token is None else token
        connect = conf.get("MARKETPLACE_CONNECT_TIMEOUT") if connect_timeout is None else connect_timeout
        read = conf.get("MARKETPLACE_READ_TIMEOUT") if read_timeout is None else read_timeout
        self.timeouts = (connect, read)
        headers = {"Accept": "application/json", "User-Agent": "optima-features/1.0"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        import httpx  # here, not at the top: httpx imports its command line (rich, pygments) when they are
        # installed, 80 ms of every process's start-up (a worker's, the web's) that imports the job catalogue

        self.http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(connect=connect, read=read, write=read, pool=connect),
        )
        self.limiter = limiter if limiter is not None else CabinetRateLimiter()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def close(self):
        self.http.close()

    def __repr__(self):
        return f"<MarketplaceClient {self.base_url}>"

    # --- API ------------------------------------------------------------------------------
    def orders(self, cabinet_id, *, page_size=None):
        """Every order of the cabinet, page after page (a list of dicts as the API sends them)."""
        found = []
        for orders, _next_page in self.order_pages(cabinet_id, page_size=page_size):
            found.extend(orders)
        return found

    def order_pages(self, cabinet_id, *, start_page=1, page_size=None):
        """The cabinet's orders one page at a time, from ``start_page``: yields ``(orders, next_page)``,
        ``next_page`` None on the last. A long job checkpoints ``next_page`` after each (features/orders/jobs.py)."""
        page_size = page_size or conf.get("MARKETPLACE_PAGE_SIZE")
        page = start_page
        while page is not None:
            data = self.request(
                "GET",
                f"/api/v1/cabinets/{int(cabinet_id)}/orders",
                scope=f"cabinet-{int(cabinet_id)}",
                params={"page": page, "page_size": page_size},
            )
            orders = data.get("orders") if isinstance(data, dict) else None
            if not isinstance(orders, list):
                raise MarketplaceUnavailable(f"GET orders of cabinet {cabinet_id}: answer has no 'orders' list")
            page = data.get("next_page")
            yield orders, page

    def set_price(self, product_id, price, *, idempotency_key):
        """Set a product's price; the key makes a repeated call a no-op on the marketplace's side."""
        return self.request(
            "POST",
            f"/api/v1/products/{int(product_id)}/price",
            scope="prices",
            json={"price": str(price)},
            headers={"Idempotency-Key": idempotency_key},
        )

    # --- transport ------------------------------------------------------------------------
    def request(self, method, path, *, scope, **kwargs):
        import httpx  # imported by __init__ already (see there)

        self.limiter.acquire(scope)
        what = f"{method} {self.base_url}{path}"
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise MarketplaceUnavailable(
                f"{what} timed out ({type(exc).__name__}; connect {self.timeouts[0]}s, read {self.timeouts[1]}s)"
            ) from None
        except httpx.TransportError as exc:
            raise MarketplaceUnavailable(f"{what} failed: {type(exc).__name__}: {exc}") from None
        status = response.status_code
        if status == 429:
            seconds = retry_after_seconds(response.headers.get("Retry-After"))
            raise Throttled(seconds, f"{what} answered 429; Retry-After {response.headers.get('Retry-After')!r}")
        if status >= 500:
            raise MarketplaceUnavailable(f"{what} answered {status}: {_snippet(response)}")
        if status >= 400:
            raise MarketplaceRejected(f"{what} answered {status}: {_snippet(response)}", status)
        try:
            return response.json()
        except ValueError:
            raise MarketplaceUnavailable(f"{what} answered {status} with a body that is not JSON") from None


def _snippet(response, limit=200):
    text = response.text.strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."
