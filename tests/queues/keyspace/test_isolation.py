"""Environment isolation: every key and channel lives under QUEUE_PREFIX.

The whole suite talks to Redis as an ACL user allowed only ``~<prefix>:*`` and ``&<prefix>:*``
(tests/session_env.py), so any key or channel escaping the prefix fails with NOPERM wherever it
happens; these tests also look at the keyspace from outside with an unconfined client.
"""

import secrets
import signal
import subprocess
import sys
import uuid

import pytest
import redis
from rq.registry import FailedJobRegistry, FinishedJobRegistry

import queues
from queues.catalog.lookup import get_queue
from tests.session_env import PREFIX, delete_prefix_keys
from tests.support import ROOT, wait_for


def all_keys(client):
    # backslashreplace: another test process may have planted a key that is not UTF-8 (the poison tests do,
    # under their own prefix); it is compared by its prefix like any other.
    return {k.decode("utf-8", "backslashreplace") for k in client.scan_iter(count=1000)}


def keys_of_no_other_test_run(client):
    """Every key of the Redis but those of the other test processes sharing it (pytest-xdist's, other runs'):
    each has an ACL user named after its prefix and confined to it (tests/session_env.py), so what lies under
    another such user's prefix was written by that process."""
    others = tuple(f"{user}:" for user in client.acl_users() if user not in ("default", PREFIX))
    return {k for k in all_keys(client) if not k.startswith(others)}


def test_the_suite_user_cannot_touch_keys_or_channels_outside_the_prefix(queue_redis):
    with pytest.raises(redis.exceptions.NoPermissionError):
        queue_redis.set("rq:escaped", 1)
    with pytest.raises(redis.exceptions.NoPermissionError):
        queue_redis.publish("rq:pubsub:someone", "x")
    queue_redis.set(f"{PREFIX}:allowed", 1)
    assert queue_redis.get(f"{PREFIX}:allowed") == b"1"


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_a_whole_lifecycle_leaves_no_key_outside_the_prefix(admin_redis, start_worker, tmp_path):
    before = keys_of_no_other_test_run(admin_redis)
    ok = queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
    bad = queues.enqueue("default", "tests.jobs.sample.fail", attempts=1)
    later = queues.enqueue("default", "tests.jobs.sample.add", 3, 4, delay=1)
    worker = start_worker("default")
    queue = get_queue("default")
    wait_for(
        lambda: set(FinishedJobRegistry(queue=queue).get_job_ids()) >= {ok.id, later.id},
        timeout=60,
        message="the immediate and the delayed job to finish",
    )
    wait_for(lambda: bad.id in FailedJobRegistry(queue=queue).get_job_ids(), timeout=60, message="the failure")
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0, worker.output()
    escaped = sorted(k for k in keys_of_no_other_test_run(admin_redis) - before if not k.startswith(f"{PREFIX}:"))
    assert escaped == []
    assert admin_redis.exists(f"{PREFIX}:job:{ok.id}", f"{PREFIX}:job:{bad.id}", f"{PREFIX}:job:{later.id}") == 3


def _other_prefix_env(admin_redis, subprocess_env):
    other = f"other-{uuid.uuid4().hex[:8]}"
    password = secrets.token_hex(8)
    admin_redis.execute_command(
        "ACL", "SETUSER", other, "reset", "on", f">{password}", f"~{other}:*", "resetchannels", f"&{other}:*", "+@all"
    )
    kw = admin_redis.connection_pool.connection_kwargs
    env = dict(
        subprocess_env,
        QUEUE_PREFIX=other,
        REDIS_URL=f"redis://{other}:{password}@{kw.get('host', '127.0.0.1')}:{kw.get('port', 6379)}/{kw.get('db', 0)}",
    )
    return other, env


def _enqueue_in(env, *args):
    code = (
        "import django; django.setup(); import queues; "
        f"print(queues.enqueue('default', 'tests.jobs.sample.touch', *{list(args)!r}).id)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=dict(env, DJANGO_SETTINGS_MODULE="optima_site.settings"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.once  # Redis and worker processes only: CI's SQLite pass (pytest.ini)
def test_two_prefixes_on_one_redis_never_run_each_others_jobs(admin_redis, subprocess_env, start_worker, tmp_path):
    other, other_env = _other_prefix_env(admin_redis, subprocess_env)
    try:
        ours_file = tmp_path / "ours.txt"
        theirs_file = tmp_path / "theirs.txt"
        queues.enqueue("default", "tests.jobs.sample.touch", str(ours_file), "ours")
        _enqueue_in(other_env, str(theirs_file), "theirs")

        assert start_worker("default", "--burst").wait(60) == 0
        assert ours_file.read_text() == "ours\n"
        assert not theirs_file.exists()
        assert admin_redis.llen(f"{other}:queue:default") == 1

        assert start_worker("default", "--burst", env=other_env).wait(60) == 0
        assert theirs_file.read_text() == "theirs\n"
        assert ours_file.read_text() == "ours\n"
    finally:
        delete_prefix_keys(admin_redis, other)
        admin_redis.execute_command("ACL", "DELUSER", other)


def test_deleting_one_prefix_keys_leaves_the_other_intact(admin_redis, subprocess_env, tmp_path):
    other, other_env = _other_prefix_env(admin_redis, subprocess_env)
    try:
        queues.enqueue("default", "tests.jobs.sample.add", 1, 2)
        _enqueue_in(other_env, str(tmp_path / "x"), "x")
        theirs = {k for k in all_keys(admin_redis) if k.startswith(f"{other}:")}
        assert len(theirs) >= 2
        delete_prefix_keys(admin_redis, PREFIX)
        assert not any(k.startswith(f"{PREFIX}:") for k in all_keys(admin_redis))
        assert {k for k in all_keys(admin_redis) if k.startswith(f"{other}:")} == theirs
    finally:
        delete_prefix_keys(admin_redis, other)
        admin_redis.execute_command("ACL", "DELUSER", other)
