"""Shared fixtures: the Redis of the session, clean prefix per test, real worker processes."""

import os

import pytest
import redis

from tests.session_env import delete_prefix_keys
from tests.support.lifecycle_settings import LIFECYCLE_QUEUES, LIFECYCLE_SCHEDULES
from tests.support.processes import WorkerProcess


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
def _clean_prefix(admin_redis):
    """Each test starts and ends with no key under the session prefix."""
    delete_prefix_keys(admin_redis)
    yield
    delete_prefix_keys(admin_redis)


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
def subprocess_env(settings):
    """Environment for a child ``manage.py`` process that shares this test's Redis and database."""
    env = dict(os.environ)
    env["DATABASE_URL"] = _db_url()
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def start_worker(subprocess_env, tmp_path):
    """``start_worker("default", "--burst", env={...})`` -> WorkerProcess; all stopped at teardown."""
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
