"""The house: what users write keeps resolving, and features use only the public ``queues`` API.

``queues/`` moved from one folder into subpackages; the dotted paths below are written in users'
settings files, URLconfs and commands (docs/settings.md, docs/install.md), so each must keep
resolving to the object it always named. Everything else moved for real.
"""

import ast
import importlib
import io
import tokenize
from pathlib import Path

import pytest
from django.utils.module_loading import import_string

ROOT = Path(__file__).resolve().parents[2]

# dotted path users write -> where the object lives now
USER_PATHS = {
    "queues.worker.OptimaWorker": "queues.worker.adapter.OptimaWorker",
    "queues.worker.OptimaSimpleWorker": "queues.worker.adapter.OptimaSimpleWorker",
    "queues.registry.OptimaJob": "queues.catalog.classes.OptimaJob",
    "queues.registry.OptimaQueue": "queues.catalog.classes.OptimaQueue",
    "queues.scheduler.PrefixedScheduler": "queues.periodic.scheduler.PrefixedScheduler",
    "queues.sentinel.CacheSentinelPool": "queues.connection.sentinel.CacheSentinelPool",
    "queues.connection.RQQueuesSetting": None,
    "queues.connection.MaskingExceptionReporterFilter": None,
    "queues.connection.MaskingExceptionReporter": None,
    "queues.logsafe.EscapeControlCharacters": "queues.logsafe.EscapeControlCharacters",
    "queues.health.healthz": "queues.health.healthz",
    "queues.metrics.views.metrics": "queues.metrics.views.metrics",
    "queues.tasks.QueuesBackend": "queues.tasks.backend.QueuesBackend",
}


@pytest.mark.parametrize("path", sorted(USER_PATHS))
def test_every_dotted_path_a_user_writes_resolves_to_the_object_it_always_named(path):
    obj = import_string(path)
    assert obj.__name__ == path.rsplit(".", 1)[1]
    if USER_PATHS[path] is not None:
        assert obj is import_string(USER_PATHS[path])


def test_the_panel_urlconf_a_user_includes_still_imports():
    module = importlib.import_module("queues.board.urls")
    assert module.app_name == "django_rq"
    assert len(module.urlpatterns) > 10


def test_the_site_settings_name_only_paths_that_resolve():
    from django.conf import settings

    for key, path in settings.RQ.items():
        assert import_string(path).__name__ == path.rsplit(".", 1)[1], key
    assert import_string(settings.DEFAULT_EXCEPTION_REPORTER_FILTER).__name__ == "MaskingExceptionReporterFilter"
    assert import_string(settings.DEFAULT_EXCEPTION_REPORTER).__name__ == "MaskingExceptionReporter"


PUBLIC_QUEUES_MODULES = {"queues"}


def _queues_imports(path):
    """(line, module) of every import of a ``queues`` module in ``path``, at any level."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "queues" or alias.name.startswith("queues."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "queues" or node.module.startswith("queues."):
                yield node.lineno, node.module


def test_features_import_only_the_public_queues_api():
    """features/ uses ``queues`` as any outside app would: ``import queues`` / ``from queues import ...``
    of the names in ``queues.__all__``, never a module inside it."""
    import queues

    offenders = []
    for path in sorted((ROOT / "features").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for line, module in _queues_imports(path):
            if module not in PUBLIC_QUEUES_MODULES:
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "queues" and node.level == 0:
                offenders += [
                    f"{path.relative_to(ROOT)}:{node.lineno} imports queues.{a.name} (not in queues.__all__)"
                    for a in node.names
                    if a.name not in queues.__all__
                ]
    assert offenders == []


def test_the_public_api_check_reports_an_internal_import(tmp_path):
    """The scan above can fail: an import of an internal module is found, at any level."""
    bad = tmp_path / "bad.py"
    bad.write_text("import queues\n\ndef f():\n    from queues.jobs import read\n    import queues.producer.outbox\n")
    assert list(_queues_imports(bad)) == [(1, "queues"), (4, "queues.jobs"), (5, "queues.producer.outbox")]


def test_every_public_name_of_queues_resolves():
    import queues

    for name in queues.__all__:
        assert getattr(queues, name) is not None, name


# What a feature reaches through the public API instead (queues.current_job(), QueueUnavailable, ...).
FORBIDDEN_IN_FEATURES = ("rq", "redis", "django_rq", "rq_scheduler")


def _forbidden_imports(path):
    """(line, module) of every import of ``rq``, ``redis``, ``django_rq`` (or a module inside one) in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in FORBIDDEN_IN_FEATURES:
                yield node.lineno, name


def test_features_import_neither_rq_nor_redis_nor_django_rq():
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in sorted((ROOT / "features").rglob("*.py"))
        if "migrations" not in path.parts
        for line, module in _forbidden_imports(path)
    ]
    assert offenders == []


def test_the_third_party_check_reports_rq_redis_and_django_rq_at_any_level(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import redis\nfrom rq import get_current_job\n\ndef f():\n    import django_rq.queues\n    import rqlike\n"
    )
    assert list(_forbidden_imports(bad)) == [(1, "redis"), (2, "rq"), (5, "django_rq.queues")]


@pytest.mark.django_db
def test_the_permission_names_are_the_codenames_the_app_declares():
    from django.contrib.auth.models import Permission

    import queues

    declared = {
        f"queues.{codename}"
        for codename in Permission.objects.filter(content_type__app_label="queues").values_list("codename", flat=True)
    }
    assert {queues.VIEW_QUEUE_PANEL, queues.ACT_ON_QUEUE_PANEL} <= declared


# Issue 31: "a test that proves that nothing happened waits for an event ..., never a bare sleep; at most 10
# sleeps left in tests/, each with its reason". Job bodies that last call tests.jobs.work, condition waits
# tests.support.poll, and the waits that are a length of time go through tests/support/clock.py.
MAX_SLEEPS_IN_TESTS = 10
SLEEP = "sleep"  # the name of the calls counted (time's, asyncio's, or one imported bare)


def _sleep_calls(folder):
    """``(path:line, text)`` of every call of a function named ``sleep`` in the Python files under ``folder``,
    and whether a comment stands on its line (its reason)."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        source = path.read_text()
        commented = {
            token.start[0]
            for token in tokenize.generate_tokens(io.StringIO(source).readline)
            if token.type == tokenize.COMMENT
        }
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name == SLEEP:
                    where = f"{path.relative_to(folder.parent)}:{node.lineno}"
                    found.append((where, lines[node.lineno - 1].strip(), node.lineno in commented))
    return sorted(found)


def test_at_most_ten_sleeps_are_left_in_tests_each_with_its_reason_on_its_line():
    found = _sleep_calls(ROOT / "tests")
    assert len(found) <= MAX_SLEEPS_IN_TESTS, "\n".join(f"{where}: {text}" for where, text, _ in found)
    assert [f"{where}: {text}" for where, text, reason in found if not reason] == []


def test_the_sleep_count_finds_every_kind_of_call_and_those_without_a_reason(tmp_path):
    folder = tmp_path / "tests"
    (folder / "jobs").mkdir(parents=True)
    (folder / "jobs" / "a.py").write_text(
        f"import time\n\ndef {SLEEP}(s):  # a job of that name: no call\n    time.{SLEEP}(s)  # the job's work\n\n\n"
        f"async def f():\n    await asyncio.{SLEEP}(0.1)\n    x = '{SLEEP}(1)'  # text, not a call\n"
    )
    (folder / "b.py").write_text(f"from time import {SLEEP}\n{SLEEP}(2)\nx = 1\n")
    assert _sleep_calls(folder) == [
        ("tests/b.py:2", f"{SLEEP}(2)", False),
        ("tests/jobs/a.py:4", f"time.{SLEEP}(s)  # the job's work", True),
        ("tests/jobs/a.py:8", f"await asyncio.{SLEEP}(0.1)", False),
    ]
