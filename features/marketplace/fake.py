"""A fake marketplace API: a real HTTP server on loopback, for the run command and the tests.

    python -m features.marketplace.fake --port 8765 [--demo]

Standard library only (``http.server``), one thread per request, state in memory. ``--port 0``
picks a free port; the first line printed is ``listening on http://127.0.0.1:<port>``.

Marketplace API (what ``features.marketplace.client`` calls)::

    GET  /api/v1/cabinets/<cabinet>/orders?page=N&page_size=M
         -> {"orders": [{"id", "status", "total", "currency", "placed_at", "updated_at"}], "next_page": N+1 | null}
    POST /api/v1/products/<product>/price   {"price": "12.50"}, header Idempotency-Key
         -> {"product_id", "price", "duplicate": false}; the same key again -> "duplicate": true, nothing applied

Control API (tests and the demo; never part of a real marketplace)::

    POST /_control/faults    {"path": "/api/v1/cabinets/7/", "responses": [...], "repeat": false}
         Scripted answers for requests whose path starts with "path", one consumed per request, before
         the normal answer. Each is {"status": 429, "retry_after": 3} | {"status": 500} |
         {"status": 404} | {"delay": 2.5} (answer normally after 2.5 s) | {"hang": true} (never answer)
         | {"status": 200} (answer normally). "repeat": true cycles through them forever.
    POST /_control/orders    {"cabinet": 7, "count": 25, "revision": 1}  orders a cabinet has (default 5)
    GET  /_control/requests  -> [{"method", "path", "query", "status", "at"}] every API request answered, in order
    POST /_control/reset     forget faults, orders, price keys and the request log

``--demo`` (the run command) scripts a mixed picture: cabinet 1 answers normally, cabinet 2 answers
429 (Retry-After 5 s) to every other request, cabinet 3 answers 500 to every other request, cabinet 4
answers its first request 404 (that sync ends in the dead letter at once; later ones succeed, and so
does the dead letter when an operator retries it).
"""

import argparse
import datetime as dt
import json
import re
import sys
import threading
import time
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ORDERS_RE = re.compile(r"^/api/v1/cabinets/(\d{1,10})/orders$")
PRICE_RE = re.compile(r"^/api/v1/products/(\d{1,18})/price$")
STATUSES = ("new", "confirmed", "shipped", "delivered")
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
HANG_MAX_SECONDS = 300  # a hanging answer gives up after this, so a forgotten client never pins a thread

DEMO_FAULTS = [
    {"path": "/api/v1/cabinets/2/", "responses": [{"status": 429, "retry_after": 5}, {"status": 200}], "repeat": True},
    {"path": "/api/v1/cabinets/3/", "responses": [{"status": 500}, {"status": 200}], "repeat": True},
    # Once: the first sync of cabinet 4 ends in the dead letter; retried from the admin, it succeeds.
    {"path": "/api/v1/cabinets/4/", "responses": [{"status": 404, "error": "cabinet 4 is not connected yet"}]},
]


class MarketplaceState:
    """Everything the fake remembers; one lock, since requests arrive on many threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.reset()

    def reset(self):
        with self.lock:
            self.faults = []  # [{"path", "responses", "repeat", "next"}]
            self.orders = {}  # cabinet -> {"count", "revision"}
            self.prices = {}  # idempotency key -> {"product_id", "price"}
            self.requests = []

    def add_fault(self, path, responses, repeat=False):
        with self.lock:
            self.faults.append({"path": path, "responses": list(responses), "repeat": bool(repeat), "next": 0})

    def next_fault(self, path):
        """The scripted answer for this request, or None for the normal one."""
        with self.lock:
            for fault in self.faults:
                if not path.startswith(fault["path"]):
                    continue
                responses = fault["responses"]
                if fault["next"] >= len(responses):
                    if not fault["repeat"]:
                        continue
                    fault["next"] = 0
                answer = responses[fault["next"]]
                fault["next"] += 1
                return answer
        return None

    def log(self, method, path, status, query=""):
        with self.lock:
            self.requests.append({"method": method, "path": path, "query": query, "status": status, "at": time.time()})

    def cabinet_orders(self, cabinet):
        with self.lock:
            spec = self.orders.get(cabinet, {"count": 5, "revision": 0})
        return [_order(cabinet, n, spec["revision"]) for n in range(1, spec["count"] + 1)]


def _order(cabinet, n, revision):
    placed = EPOCH + dt.timedelta(hours=n)
    return {
        "id": f"C{cabinet}-{n:05d}",
        "status": STATUSES[(n + revision) % len(STATUSES)],
        "total": f"{100 + n}.{n % 100:02d}",
        "currency": "RUB",
        "placed_at": placed.isoformat(),
        "updated_at": (placed + dt.timedelta(minutes=revision)).isoformat(),
    }


class Handler(BaseHTTPRequestHandler):
    server_version = "FakeMarketplace/1.0"
    protocol_version = "HTTP/1.1"

    @property
    def state(self):
        return self.server.state

    def log_message(self, format, *args):  # one line per request on stderr, as http.server does
        if not self.server.quiet:
            super().log_message(format, *args)

    # --- plumbing ---------------------------------------------------------------------------
    def _send(self, status, body, headers=None):
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        try:
            data = json.loads(self.rfile.read(length))
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method):
        url = urlsplit(self.path)
        if url.path.startswith("/_control/"):
            return self._control(method, url.path)
        return self._api(method, url)

    # --- the marketplace API ----------------------------------------------------------------
    def _api(self, method, url):
        body = self._body() if method == "POST" else {}
        fault = self.state.next_fault(url.path)
        if fault and fault.get("hang"):
            self.state.log(method, url.path, None, url.query)
            self.state.stopping.wait(HANG_MAX_SECONDS)
            self.close_connection = True
            return
        if fault and fault.get("delay"):
            time.sleep(float(fault["delay"]))
        if fault and fault.get("status", 200) != 200:
            status = int(fault["status"])
            headers = {}
            if status == 429:
                headers["Retry-After"] = str(fault.get("retry_after", 1))
            self.state.log(method, url.path, status, url.query)
            return self._send(status, {"error": fault.get("error", f"injected {status}")}, headers)
        status, payload = self._answer(method, url, body)
        self.state.log(method, url.path, status, url.query)
        self._send(status, payload)

    def _answer(self, method, url, body):
        match = ORDERS_RE.match(url.path)
        if match and method == "GET":
            query = parse_qs(url.query)
            try:
                page = int(query.get("page", ["1"])[0])
                size = int(query.get("page_size", ["100"])[0])
            except ValueError:
                return 400, {"error": "page and page_size must be integers"}
            if page < 1 or not 1 <= size <= 1000:
                return 400, {"error": "page must be >= 1 and page_size 1..1000"}
            orders = self.state.cabinet_orders(int(match.group(1)))
            chunk = orders[(page - 1) * size : page * size]
            more = page * size < len(orders)
            return 200, {"orders": chunk, "next_page": page + 1 if more else None}
        match = PRICE_RE.match(url.path)
        if match and method == "POST":
            if body is None or "price" not in body:
                return 400, {"error": "body must be a JSON object with 'price'"}
            try:
                price = Decimal(str(body["price"]))
            except InvalidOperation:
                return 400, {"error": f"price must be a decimal, got {body['price']!r}"}
            if price <= 0:
                return 422, {"error": f"price must be > 0, got {body['price']!r}"}
            product = int(match.group(1))
            key = self.headers.get("Idempotency-Key") or ""
            with self.state.lock:
                duplicate = bool(key) and key in self.state.prices
                if not duplicate and key:
                    self.state.prices[key] = {"product_id": product, "price": str(price)}
            return 200, {"product_id": product, "price": str(price), "duplicate": duplicate}
        return 404, {"error": f"no such endpoint: {method} {url.path}"}

    # --- control ----------------------------------------------------------------------------
    def _control(self, method, path):
        body = self._body() if method == "POST" else {}
        if body is None:
            return self._send(400, {"error": "body must be a JSON object"})
        if method == "GET" and path == "/_control/requests":
            with self.state.lock:
                return self._send(200, list(self.state.requests))
        if method == "POST" and path == "/_control/reset":
            self.state.reset()
            return self._send(200, {"ok": True})
        if method == "POST" and path == "/_control/faults":
            if not isinstance(body.get("path"), str) or not isinstance(body.get("responses"), list):
                return self._send(400, {"error": "give 'path' (a path prefix) and 'responses' (a list)"})
            self.state.add_fault(body["path"], body["responses"], body.get("repeat", False))
            return self._send(200, {"ok": True})
        if method == "POST" and path == "/_control/orders":
            try:
                cabinet, count, revision = int(body["cabinet"]), int(body.get("count", 5)), int(body.get("revision", 0))
            except (KeyError, TypeError, ValueError):
                return self._send(400, {"error": "give 'cabinet' and optionally 'count' and 'revision' (integers)"})
            with self.state.lock:
                self.state.orders[cabinet] = {"count": count, "revision": revision}
            return self._send(200, {"ok": True})
        return self._send(404, {"error": f"no such control endpoint: {method} {path}"})


class FakeMarketplace(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host="127.0.0.1", port=0, *, demo=False, quiet=False):
        self.state = MarketplaceState()
        self.quiet = quiet
        super().__init__((host, port), Handler)
        if demo:
            for fault in DEMO_FAULTS:
                self.state.add_fault(**fault)
            self.state.orders[1] = {"count": 12, "revision": 0}

    @property
    def url(self):
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def shutdown(self):
        self.state.stopping.set()  # release hanging answers
        super().shutdown()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m features.marketplace.fake", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (0: a free one; default 8765)")
    parser.add_argument("--demo", action="store_true", help="inject the run command's failures (see module doc)")
    parser.add_argument("--quiet", action="store_true", help="no per-request log lines")
    args = parser.parse_args(argv)
    server = FakeMarketplace(args.host, args.port, demo=args.demo, quiet=args.quiet)
    print(
        f"listening on {server.url}"
        + (" (demo faults: cabinet 2 -> 429, 3 -> 500, 4 -> 404 once)" if args.demo else ""),
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.state.stopping.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
