"""Shared fixtures: the Redis of the session, clean prefix per test, real worker processes."""

import json
import logging
import os
import signal

import pytest
import redis

from tests.session_env import PREFIX, delete_prefix_keys
from tests.support.lifecycle_settings import LIFECYCLE_QUEUES, LIFECYCLE_SCHEDULES
from tests.support.processes import WorkerProcess
from tests.support.servers_settings import SERVER_B_QUEUES

# The fixtures through which a test reaches the database (pytest-django's, and what builds on them); a test
# whose fixture closure holds none of them, and that carries no django_db marker, has no database behaviour of
# its own: Django refuses it the database in this process (pytest-django), and the workers it starts read the
# database only as every worker start does.
DATABASE_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_reset_sequences",
        "django_db_serialized_rollback",
        "live_server",
        "admin_user",
        "admin_client",
        "django_user_model",
    }
)


def pytest_addoption(parser):
    parser.addoption(
        "--db-only",
        action="store_true",
        help="run only the tests that use the database (a django_db marker or a database fixture): CI's second "
        "pass, against PostgreSQL, where a test of Redis and workers alone would only run again",
    )


def uses_database(item):
    return item.get_closest_marker("django_db") is not None or not DATABASE_FIXTURES.isdisjoint(
        getattr(item, "fixturenames", ())
    )


def pytest_collection_modifyitems(config, items):
    # The slow tests first, each file's in its order: under pytest-xdist the two processes then start on the
    # minute-long ones and the quick ones fill in behind, rather than one process ending the run on a long tail.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    if not config.getoption("--db-only"):
        return
    kept, left = [], []
    for item in items:
        (kept if uses_database(item) else left).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def pytest_make_parametrize_id(config, val, argname):
    """A parameter naming this process's prefix gets an id without it: pytest-xdist's processes have prefixes
    of their own and must collect the same test ids."""
    if isinstance(val, str) and PREFIX in val:
        return val.replace(PREFIX, "<prefix>")
    return None


@pytest.fixture(scope="session")
def admin_redis():
    """A client with full rights on the session's Redis (not confined to the prefix)."""
    client = redis.Redis.from_url(os.environ["OPTIMA_TEST_ADMIN_REDIS_URL"])
    yield client
    client.close()


@pytest.fixture
def queue_redis():
    """The queues' own client, as the app uses it (the prefix-confined ACL user)."""
    from queues.connection.clients import get_connection

    return get_connection()


@pytest.fixture(autouse=True)
def _panel_deadline_for_a_shared_machine(settings):
    """The panel's per-page Redis deadline (``QUEUE_BOARD_DEADLINE``, 1.5 s) is a production bound of Redis work
    per page; two test processes and their workers on two cores stretch a big page's reads past it, and the
    page answers 503 where the test reads its content. Tests of the deadline set it themselves; a hanging Redis
    still fails each round trip after ``QUEUE_BOARD_REDIS_TIMEOUT`` (0.5 s), as in production."""
    settings.QUEUE_BOARD_DEADLINE = 10


@pytest.fixture(autouse=True)
def _fresh_repeats():
    """Repeated reports are summed up per process and minute (``queues/keyspace/repeats.py``): each test sees
    the first report of its own entries logged, whatever an earlier test of this process reported."""
    from queues.keyspace import repeats

    repeats.reporter.reset()


@pytest.fixture(autouse=True)
def _own_log_record_factory():
    """A test that runs ``rqworker`` or ``rqscheduler`` in this process installs their log escaping
    (``queues.logsafe.install``: a record factory, once per process, for good); a later test of this process then
    read its ``queues.*`` and ``rq.*`` records escaped (``b'\\xff'``). Each test ends with the factory it found."""
    factory = logging.getLogRecordFactory()
    yield
    logging.setLogRecordFactory(factory)


@pytest.fixture(autouse=True)
def _clean_prefix(admin_redis):
    """Each test starts and ends with no key under the session prefix; and with no note of this process that rq's
    set of queues holds a queue (``producer.write.queue_set_into`` writes it once a minute, as to a Redis that
    keeps its data)."""
    from queues.producer import write

    delete_prefix_keys(admin_redis)
    write._queue_set_at.clear()
    yield
    delete_prefix_keys(admin_redis)


@pytest.fixture
def private_redis(settings):
    """A redis-server of this test's own, made the queues' Redis: its counters (commandstats, INFO) are this
    test's alone, whatever runs beside it (dev.py test runs two test processes on the session's Redis)."""
    from devtools.redis_server import RedisServer

    server = RedisServer().start()
    settings.QUEUES_REDIS_URL = server.url
    yield server
    if server.process is not None:
        server.process.send_signal(signal.SIGCONT)  # a test may have stopped it (SIGSTOP)
    server.stop()


@pytest.fixture
def second_redis(settings):
    """A second redis-server of this test's own, declared as the Redis server ``b`` (QUEUES_REDIS_SERVERS) with
    the queues ``on-b`` and ``on-b-2`` on it (SERVER_B_QUEUES); every other queue stays on the session's Redis.
    Worker processes see the same with the ``server_b_env`` fixture's environment."""
    from tests.support.outages import DurableRedisServer  # imports rq: not before Django set its key prefix

    server = DurableRedisServer().start()  # keeps its data across a stop, as a production server would
    settings.QUEUES_REDIS_SERVERS = {"b": server.url}
    settings.OPTIMA_QUEUES = dict(settings.OPTIMA_QUEUES, **SERVER_B_QUEUES)
    yield server
    if server.process is not None:
        server.process.send_signal(signal.SIGCONT)  # a test may have stopped it (SIGSTOP)
    server.stop()


@pytest.fixture
def server_b_env(second_redis):
    """The environment of a worker process that sees ``second_redis``'s server ``b`` and its queues."""
    return {
        "DJANGO_SETTINGS_MODULE": "tests.support.servers_settings",
        "REDIS_SERVERS": json.dumps({"b": second_redis.url}),
    }


def _db_url():
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or ""
    password = s.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = s.get("HOST") or "127.0.0.1"
    port = s.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{s['NAME']}"


@pytest.fixture
def subprocess_env(settings, django_db_setup):
    """Environment for a child ``manage.py`` process that shares this test's Redis and database.

    ``django_db_setup`` first: the test database exists (and ``NAME`` names it) before a child is told to use
    it, whatever test ran first in this process (under pytest-xdist, a worker's first test may start workers).
    """
    env = dict(os.environ)
    env["DATABASE_URL"] = _db_url()
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def start_worker(subprocess_env, tmp_path, transactional_db):
    """``start_worker("default", "--burst", env={...})`` -> WorkerProcess; all stopped at teardown.

    Transactional: a worker writes dead letters and audit rows into the test database from its own connection,
    which no test transaction rolls back; the flush after the test removes them (a test of another process
    found a dead letter of an earlier worker test in its admin list)."""
    started = []

    def start(*args, env=None, command="rqworker"):
        log = tmp_path / f"{command}-{len(started)}.log"
        proc = WorkerProcess([command, *args], dict(subprocess_env, **(env or {})), log)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


# The lifecycle queue and schedules (tests/support/lifecycle_settings.py), as worker processes started with
# tests.support.lifecycle.WORKER_ENV see them.


@pytest.fixture
def lifecycle_queue(settings):
    """Declare the ``lifecycle`` queue in this process the way worker processes started with
    WORKER_ENV see it."""
    settings.OPTIMA_QUEUES = dict(settings.OPTIMA_QUEUES, **LIFECYCLE_QUEUES)
    return "lifecycle"


@pytest.fixture
def lifecycle_schedules(settings, lifecycle_queue):
    """The schedules worker/scheduler processes started with WORKER_ENV see, declared in this process."""
    settings.OPTIMA_SCHEDULES = LIFECYCLE_SCHEDULES
    return LIFECYCLE_SCHEDULES


# The panel's and the dead-letter admin's users (tests/support/panel.py).


@pytest.fixture
def prod(settings):
    """stage/prod rules (no DEBUG openness), no shared basic-auth account: staff accounts only."""
    settings.OPTIMA_ENV = "prod"
    settings.QUEUE_BOARD_USER = ""
    settings.QUEUE_BOARD_PASSWORD = ""
    return settings


@pytest.fixture
def viewer(django_user_model):
    """A client signed in as staff who may view dead letters."""
    from django.test import Client

    from tests.support.panel import make_staff

    client = Client()
    client.force_login(make_staff(django_user_model, "viewer", "queues.view_deadletter"))
    return client


@pytest.fixture
def actor(django_user_model):
    """A client signed in as staff who may view and act on dead letters."""
    from django.test import Client

    from tests.support.panel import make_staff

    client = Client()
    client.force_login(make_staff(django_user_model, "actor", "queues.view_deadletter", "queues.act_on_deadletter"))
    return client


@pytest.fixture
def redis_sends(monkeypatch):
    """Counts this process's sends to Redis (one per command, one per pipeline): ``redis_sends()``, or the sends since
    ``redis_sends(before)``. (A panel page's round trips: tests/support/roundtrips.py, the board's own.)"""
    sent = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counted(self, command, check_health=True):
        sent.append(command)
        return original(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)

    def count(since=0):
        return len(sent) - since

    return count
