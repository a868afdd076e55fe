"""Fixtures of the feature tests: the fake marketplace as a real HTTP server in its own process,
an authenticated API client, and workers pointed at the marketplace."""

import subprocess
import sys

import httpx
import pytest

from tests.support import ROOT


class Marketplace:
    """A running ``python -m features.marketplace.fake`` and its control API."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "features.marketplace.fake", "--port", "0", "--quiet"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        line = self.process.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.process.kill()
            raise RuntimeError(f"fake marketplace did not start: {line!r}")
        self.url = line.split()[2]
        self.http = httpx.Client(base_url=self.url, timeout=10)

    def fault(self, path, *responses, repeat=False):
        self.http.post(
            "/_control/faults", json={"path": path, "responses": list(responses), "repeat": repeat}
        ).raise_for_status()

    def set_orders(self, cabinet, count, revision=0):
        self.http.post(
            "/_control/orders", json={"cabinet": cabinet, "count": count, "revision": revision}
        ).raise_for_status()

    def requests(self, path_prefix=""):
        log = self.http.get("/_control/requests").json()
        return [r for r in log if r["path"].startswith(path_prefix)]

    def statuses(self, path_prefix=""):
        return [r["status"] for r in self.requests(path_prefix)]

    def stop(self):
        self.http.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


@pytest.fixture
def marketplace():
    server = Marketplace()
    yield server
    server.stop()


def token_client(username, *, staff_perms=()):
    """A DRF test client authenticated with a token as a new user; ``client.own(cabinets=, products=)``
    makes that user the owner of those marketplace ids (the endpoints serve only the caller's own)."""
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from features.sellers.models import Cabinet, Product

    user = User.objects.create_user(username, password="not-used-here", is_staff=bool(staff_perms))
    for perm in staff_perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    token = Token.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    client.token = token.key
    client.user = user

    def own(cabinets=(), products=()):
        for cabinet_id in cabinets:
            Cabinet.objects.update_or_create(cabinet_id=cabinet_id, defaults={"owner": user})
        for product_id in products:
            Product.objects.update_or_create(product_id=product_id, defaults={"owner": user})
        return client

    client.own = own
    return client


@pytest.fixture
def api(db):
    """A token-authenticated client (the feature API needs one outside dev); ``api.own(cabinets=[12])``."""
    return token_client("feature-client")


@pytest.fixture
def make_api(db):
    """``make_api("seller-b", staff_perms=["queues.view_queue_panel"])``: another authenticated client."""
    return token_client


@pytest.fixture
def feature_worker(start_worker, marketplace):
    """``feature_worker("orders-sync", env={...})``: a real rqworker talking to the fake marketplace."""

    def start(*queues, env=None):
        return start_worker(*queues, env={"MARKETPLACE_URL": marketplace.url, **(env or {})})

    return start
