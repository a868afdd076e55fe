"""System checks of the queue configuration (ids listed in docs/checks.md)."""

import ast

from django.conf import settings
from django.core.checks import Error, run_checks
from django.test import override_settings

from tests.support import ROOT


def queue_errors():
    return [e for e in run_checks() if e.id.startswith("queues.")]


def test_good_configuration_has_no_queue_errors():
    assert queue_errors() == []


@override_settings(QUEUE_PREFIX="Optima Prod")
def test_invalid_prefix_is_e001():
    assert queue_errors() == [
        Error(
            "QUEUE_PREFIX must match [a-z0-9][a-z0-9_-]{0,63}, got 'Optima Prod'.",
            hint="Use lower-case letters, digits, '-' and '_', e.g. 'optima' or 'optima-stage'.",
            id="queues.E001",
        )
    ]


@override_settings(OPTIMA_QUEUES={"default": {"atempts": 3}})
def test_unknown_option_key_is_e002_with_did_you_mean():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E002"]
    assert errors[0].msg == "OPTIMA_QUEUES['default'] has an unknown option 'atempts'."
    assert errors[0].hint.startswith("Did you mean 'attempts'? Valid options: attempts, backoff")


@override_settings(OPTIMA_QUEUES={"orders-sync": {"attempts": 0}})
def test_non_positive_attempts_is_e003_naming_value_and_fix():
    assert queue_errors() == [
        Error(
            "OPTIMA_QUEUES['orders-sync']['attempts'] must be an integer >= 1, got 0.",
            hint="attempts counts every run, the first included: 1 disables retries, 5 is the default.",
            id="queues.E003",
        )
    ]


@override_settings(OPTIMA_QUEUE_DEFAULTS={"attempts": -2})
def test_non_positive_global_attempts_is_e003():
    errors = queue_errors()
    assert [(e.id, e.msg) for e in errors] == [
        ("queues.E003", "OPTIMA_QUEUE_DEFAULTS['attempts'] must be an integer >= 1, got -2.")
    ]


@override_settings(OPTIMA_QUEUES={"Orders Sync": {}})
def test_queue_name_outside_the_allowed_pattern_is_e004():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E004"]
    assert "'Orders Sync'" in errors[0].msg
    assert "[a-z0-9][a-z0-9_-]*" in errors[0].hint


@override_settings(OPTIMA_QUEUES={"default": {"timeout": -1, "jitter": 2}})
def test_bad_option_values_are_e005():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E005", "queues.E005"]
    assert errors[0].msg == "OPTIMA_QUEUES['default']['timeout'] must be a number of seconds > 0, got -1."
    assert errors[1].msg == "OPTIMA_QUEUES['default']['jitter'] must be a fraction between 0 and 1, got 2."


@override_settings(QUEUE_PREFIX="another-env")
def test_rq_imported_with_another_prefix_is_e006():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E006"]
    assert "'another-env'" in errors[0].msg
    assert errors[0].hint.startswith(
        "The queues app sets rq's prefix from QUEUE_PREFIX when Django loads it, unless "
        "rq is imported already: list 'queues' before 'django_rq'"
    )


@override_settings(OPTIMA_QUEUES={"default": {"non_retryable": ["no.such.Error", "json.JSONDecodeError"]}})
def test_non_retryable_entry_that_is_not_an_exception_class_is_e007():
    errors = queue_errors()
    assert [(e.id, e.msg) for e in errors] == [
        (
            "queues.E007",
            "OPTIMA_QUEUES['default']['non_retryable'] lists 'no.such.Error', which is not an "
            "importable exception class.",
        )
    ]


@override_settings(OPTIMA_QUEUES={"default": 5})
def test_queue_options_that_are_not_a_dict_are_e008():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E008"]


def test_django_rq_without_this_apps_worker_class_is_e009():
    with override_settings(RQ=dict(settings.RQ, WORKER_CLASS="rq.worker.Worker")):
        assert queue_errors() == [
            Error(
                "settings.RQ['WORKER_CLASS'] is 'rq.worker.Worker', expected 'queues.worker.OptimaWorker'.",
                hint="django-rq builds jobs, queues, workers and schedulers from settings.RQ: without this app's "
                "classes jobs are pickled and failures are not retried. Set RQ = {'JOB_CLASS': "
                "'queues.registry.OptimaJob', 'QUEUE_CLASS': 'queues.registry.OptimaQueue', 'SCHEDULER_CLASS': "
                "'queues.scheduler.PrefixedScheduler', 'WORKER_CLASS': 'queues.worker.OptimaWorker'} in your "
                "settings (docs/install.md).",
                id="queues.E009",
            )
        ]


@override_settings(RQ_QUEUES={"default": {"URL": "redis://127.0.0.1:6379/0"}})
def test_rq_queues_written_by_hand_is_e010():
    assert queue_errors() == [
        Error(
            "settings.RQ_QUEUES is a dict, expected queues.connection.RQQueuesSetting().",
            hint="In your settings: `from queues.connection import RQQueuesSetting` and `RQ_QUEUES = "
            "RQQueuesSetting()` (it imports nothing of rq): django-rq then sees exactly the declared queues. "
            "Declare queues in OPTIMA_QUEUES or an app's queues.py instead.",
            id="queues.E010",
        )
    ]


@override_settings(OPTIMA_QUEUES={"default": {"attempts": 0}})
def test_using_a_broken_configuration_raises_the_same_message():
    import pytest
    from django.core.exceptions import ImproperlyConfigured

    import queues

    with pytest.raises(ImproperlyConfigured) as excinfo:
        queues.get_queue("default")
    assert "OPTIMA_QUEUES['default']['attempts'] must be an integer >= 1, got 0." in str(excinfo.value)
    assert "queues.E003" in str(excinfo.value)


# -- trust boundary: declared and signed jobs (queues/catalog/jobs.py, queues/jobs/signing.py) -------------


@override_settings(QUEUE_JOB_MODULES=["tests.jobs", "features.nowhere.tasks"])
def test_a_job_module_that_cannot_be_imported_is_e025():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E025"]
    assert errors[0].msg.startswith("QUEUE_JOB_MODULES names 'features.nowhere.tasks', which cannot be imported")


@override_settings(QUEUE_ACCEPT_UNSIGNED_UNTIL="next tuesday")
def test_an_unsigned_window_that_is_not_a_time_is_e026():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E026"]
    assert "'next tuesday', which is not an ISO 8601 time" in errors[0].msg
    assert "2026-12-01T12:00:00Z" in errors[0].hint


@override_settings(QUEUE_ACCEPT_UNSIGNED_UNTIL="2999-01-01T00:00:00Z")
def test_an_unsigned_window_far_ahead_is_w027():
    errors = queue_errors()
    assert [(e.id, e.level) for e in errors] == [("queues.W027", 30)]
    assert "anyone who can write to the queues' Redis can run any declared job" in errors[0].msg


@override_settings(QUEUE_SIGNING_KEY="short", QUEUE_SIGNING_OLD_KEYS=["x" * 40, "tiny"])
def test_a_short_signing_key_is_e028_naming_which():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E028", "queues.E028"]
    assert errors[0].msg.startswith("QUEUE_SIGNING_KEY is 5 characters long")
    assert errors[1].msg.startswith("QUEUE_SIGNING_OLD_KEYS[1] is 4 characters long")


@override_settings(
    OPTIMA_SCHEDULES=[
        {"id": "helper", "queue": "default", "interval": 60, "func": "features.repricer.jobs.marketplace_key"}
    ]
)
def test_a_schedule_of_a_function_that_is_not_a_declared_job_is_e036():
    errors = queue_errors()
    assert [e.id for e in errors] == ["queues.E036"]
    assert "'features.repricer.jobs.marketplace_key' is not a declared job" in errors[0].msg


def test_no_check_message_or_hint_names_this_repositorys_settings_module():
    """A project that installs the app has no optima_site/settings.py: every message of queues/ names the setting
    and the fix instead. Reads the string literals inside every Problem(...), Error(...), Warning(...) and
    ImproperlyConfigured(...) call of queues/."""
    callees = {"Problem", "Error", "Warning", "ImproperlyConfigured"}
    offending = []
    for path in sorted((ROOT / "queues").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            func = getattr(node, "func", None)
            name = getattr(func, "id", None) or getattr(func, "attr", None)
            if isinstance(node, ast.Call) and name in callees:
                texts = [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                offending += [
                    f"{path.relative_to(ROOT)}:{node.lineno}" for t in texts if "optima_site" in t or "settings.py" in t
                ]
    assert offending == []
