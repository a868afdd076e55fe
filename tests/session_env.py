"""Test-session environment, set up before Django reads its settings (a ``-p`` plugin).

- REDIS_URL unset: a throwaway redis-server (devtools.redis_server) on a free port, stopped at exit.
- A unique ``QUEUE_PREFIX`` per run (``test-<hex>``), so runs sharing a Redis never mix; under pytest-xdist, one
  per worker process, so that the workers running side by side never mix either.
- The suite then talks to Redis as an ACL user allowed only ``~<prefix>:*`` keys and
  ``&<prefix>:*`` channels: any key or channel escaping the prefix fails loudly. The admin URL
  (``OPTIMA_TEST_ADMIN_REDIS_URL``) is kept for what needs more (scans of the whole keyspace,
  outage tests, clean-up).
"""

import atexit
import os
import secrets
import uuid

import redis

_server = None

if not os.environ.get("OPTIMA_ENV"):  # unset means prod (optima_site/settings.py)
    os.environ["OPTIMA_ENV"] = "test"
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ... under pytest-xdist
PREFIX = os.environ.get("OPTIMA_TEST_PREFIX") or f"test-{uuid.uuid4().hex[:10]}"
if XDIST_WORKER and os.environ.get("OPTIMA_TEST_PREFIX"):
    PREFIX = f"{PREFIX}-{XDIST_WORKER}"
os.environ["QUEUE_PREFIX"] = PREFIX
os.environ["RQ_KEY_PREFIX"] = PREFIX
# The suite's own jobs (tests/jobs/*.py) are declared jobs like a feature app's (queues/catalog/jobs.py).
os.environ.setdefault("QUEUE_JOB_MODULES", "tests.jobs")

# A pytest-xdist worker (dev.py test runs the suite in two) inherits the controller's environment: the
# controller's Redis (its admin URL), never a server of its own; the prefix and the ACL user below are the
# worker's own, so that the workers' tests never see each other's keys.
if XDIST_WORKER and os.environ.get("OPTIMA_TEST_ADMIN_REDIS_URL"):
    os.environ["REDIS_URL"] = os.environ["OPTIMA_TEST_ADMIN_REDIS_URL"]
elif not os.environ.get("REDIS_URL"):
    from devtools.redis_server import RedisServer

    _server = RedisServer().start()
    # pytest_unconfigure stops it; this too, for a session that ends before this plugin was configured (an
    # import error in a conftest left such servers running; stop() is idempotent)
    atexit.register(_server.stop)
    os.environ["REDIS_URL"] = _server.url

ADMIN_URL = os.environ["REDIS_URL"]
os.environ["OPTIMA_TEST_ADMIN_REDIS_URL"] = ADMIN_URL
_admin = redis.Redis.from_url(ADMIN_URL)
ACL_USER = PREFIX
_password = secrets.token_hex(16)
_admin.execute_command(
    "ACL",
    "SETUSER",
    ACL_USER,
    "reset",
    "on",
    f">{_password}",
    f"~{PREFIX}:*",
    "resetchannels",
    f"&{PREFIX}:*",
    "+@all",
)
_parts = redis.connection.parse_url(ADMIN_URL)
_host = _parts.get("host", "127.0.0.1")
_port = _parts.get("port", 6379)
_db = _parts.get("db", 0)
_scheme = "rediss" if ADMIN_URL.startswith("rediss://") else "redis"
os.environ["REDIS_URL"] = f"{_scheme}://{ACL_USER}:{_password}@{_host}:{_port}/{_db}"
os.environ.pop("CACHE_REDIS_URL", None)


def delete_prefix_keys(client, prefix=PREFIX):
    for keys in _chunks(client.scan_iter(match=f"{prefix}:*", count=1000), 500):
        client.delete(*keys)


def _chunks(iterable, size):
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def pytest_report_header(config):
    where = "private redis-server" if _server else "REDIS_URL"
    return f"queues: QUEUE_PREFIX={PREFIX}, Redis from {where}, ACL user {ACL_USER} confined to {PREFIX}:*"


def pytest_unconfigure(config):
    try:
        delete_prefix_keys(_admin)
        _admin.execute_command("ACL", "DELUSER", ACL_USER)
    except redis.RedisError:
        pass
    if _server is not None:
        _server.stop()
