"""A project's tests get a prefix of their own per run, removed at the end (queues/testing.py): proven with a
real ``manage.py test`` and a real pytest-django run in child processes, on a prefix that names no test run."""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest
from django.conf import settings

from queues import testing
from tests.session_env import PREFIX
from tests.support import ROOT


def test_a_prefix_already_chosen_for_tests_is_kept():
    """This suite's own prefix (tests/session_env.py) names a test run: the app keeps it, exports nothing."""
    assert settings.QUEUE_PREFIX == PREFIX
    assert testing.PREFIX_ENV not in os.environ


@pytest.mark.parametrize(
    "argv,modules,expected",
    [
        (["manage.py", "test"], {}, True),
        (["manage.py", "test", "shop.tests"], {}, True),
        (["pytest"], {"pytest_django": object()}, True),
        (["manage.py", "rqworker", "default"], {}, False),
        (["manage.py", "runserver", "test"], {}, False),
        (["gunicorn", "site.wsgi"], {}, False),
    ],
)
def test_a_test_run_is_manage_py_test_or_pytest_django(argv, modules, expected):
    assert testing.is_test_run(argv, modules) is expected


@pytest.mark.parametrize(
    "prefix,expected",
    [("test-3f2a", True), ("optima-test-3f2a", True), ("optima", False), ("contest", False), ("tests", False)],
)
def test_a_prefix_names_a_test_run_when_test_is_one_of_its_words(prefix, expected):
    assert testing.names_a_test_run(prefix) is expected


def _probe_env(base, out):
    env = dict(os.environ)
    env.pop("RQ_KEY_PREFIX", None)
    env.pop(testing.PREFIX_ENV, None)
    env.update(
        QUEUE_PREFIX=base,
        REDIS_URL=os.environ["OPTIMA_TEST_ADMIN_REDIS_URL"],  # the child's prefix is outside this run's ACL
        PROBE_OUT=str(out),
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="optima_site.settings",
    )
    return env


RUNNERS = {
    "manage.py test": lambda tmp: [sys.executable, "manage.py", "test", "tests.support.isolation_probe", "-v", "0"],
    "pytest-django": lambda tmp: [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-c",
        str(tmp / "pytest.ini"),
        "--rootdir",
        str(tmp),
        str(ROOT / "tests" / "support" / "isolation_probe.py"),
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_projects_test_run_enqueues_under_its_own_prefix_and_leaves_no_key(admin_redis, tmp_path, runner):
    base = f"iso{uuid.uuid4().hex[:8]}"
    out = tmp_path / "probe.json"
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nDJANGO_SETTINGS_MODULE = optima_site.settings\npython_files = isolation_probe.py\n"
    )
    try:
        run = subprocess.run(
            RUNNERS[runner](tmp_path), cwd=ROOT, env=_probe_env(base, out), capture_output=True, text=True, timeout=120
        )
        assert run.returncode == 0, run.stdout + run.stderr
        probe = json.loads(out.read_text())
        assert re.fullmatch(rf"{base}-test-[0-9a-f]{{10}}", probe["prefix"]), probe
        assert any(probe["job"] in key for key in probe["keys"]), probe  # the job was written, under that prefix
        assert sorted(admin_redis.scan_iter(match=f"{probe['prefix']}:*")) == []  # removed at the run's end
        assert sorted(admin_redis.scan_iter(match=f"{base}:*")) == []  # the configured prefix never touched
    finally:
        for key in admin_redis.scan_iter(match=f"{base}*"):
            admin_redis.delete(key)
