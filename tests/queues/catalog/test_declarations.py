"""Queue declarations: settings and installed apps merged once, in one place, checked before use."""

import ast

import pytest
from django.apps import AppConfig
from django.conf import settings
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from queues import conf
from queues.catalog import queues as declarations
from queues.catalog.queues import QueueConfig
from tests.support import ROOT

DEFAULTS = conf.JOB_DEFAULTS
FEATURE_QUEUES = ["content", "orders-sync", "repricer"]  # features/*/queues.py


class InvoicingConfig(AppConfig):
    """An app that declares its queues as an AppConfig attribute (it has no queues.py)."""

    name = "tests.queues"
    label = "invoicing"
    queues = {"invoices": {"attempts": 3}, "content": {"backoff": 9}}


class BrokenConfig(AppConfig):
    name = "tests.queues"
    label = "broken"
    queues = {"Invoices": {}}


def installed_with(app_config_class, **more):
    path = f"{__name__}.{app_config_class.__name__}"
    return override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, path], **more)


def test_settings_override_an_apps_queue_key_by_key_above_the_global_defaults():
    with override_settings(
        OPTIMA_QUEUE_DEFAULTS={"backoff": 7.0, "attempts": 4}, OPTIMA_QUEUES={"default": {}, "content": {"attempts": 3}}
    ):
        content = declarations.declared()["content"]
    # built-in < OPTIMA_QUEUE_DEFAULTS (backoff) < features/content/queues.py (timeout) < OPTIMA_QUEUES (attempts)
    assert content == QueueConfig(
        "content", {**DEFAULTS, "backoff": 7.0, "timeout": 600, "attempts": 3, "limit_concurrency": 2}, "content"
    )


def test_a_queue_declared_only_in_settings_has_the_global_defaults_under_its_own_options():
    with override_settings(OPTIMA_QUEUE_DEFAULTS={"attempts": 4}, OPTIMA_QUEUES={"invoices": {"timeout": 30}}):
        invoices = declarations.declared()["invoices"]
    assert invoices == QueueConfig("invoices", {**DEFAULTS, "attempts": 4, "timeout": 30}, "settings")


def test_a_queue_declared_only_by_an_apps_queues_module_keeps_the_apps_options():
    assert declarations.declared()["repricer"] == QueueConfig(
        "repricer", {**DEFAULTS, "attempts": 1, "limit_concurrency": 4}, "repricer"
    )


def test_without_feature_apps_only_the_settings_declare_queues():
    site_apps = [app for app in settings.INSTALLED_APPS if not app.startswith("features.")]
    with override_settings(INSTALLED_APPS=site_apps, OPTIMA_QUEUES={"default": {}, "invoices": {}}):
        declared = declarations.declared()
    assert [(c.name, c.source) for c in declared.values()] == [("default", "settings"), ("invoices", "settings")]


def test_with_no_queue_in_settings_the_apps_declare_them_all():
    with override_settings(OPTIMA_QUEUES={}):
        assert list(declarations.declared()) == FEATURE_QUEUES


def test_an_app_may_declare_queues_as_an_appconfig_attribute_merged_after_earlier_apps():
    assert "invoices" not in declarations.declared()  # cached before INSTALLED_APPS changes
    with installed_with(InvoicingConfig):
        declared = declarations.declared()
    assert declared["invoices"] == QueueConfig("invoices", {**DEFAULTS, "attempts": 3}, "invoicing")
    # features.content comes first in INSTALLED_APPS: it names the source, the later app adds a key.
    assert declared["content"] == QueueConfig(
        "content", {**DEFAULTS, "timeout": 600, "attempts": 2, "limit_concurrency": 2, "backoff": 9}, "content"
    )
    assert "invoices" not in declarations.declared()


def test_declarations_are_read_again_when_a_setting_changes_and_when_the_override_ends():
    before = declarations.declared()
    with override_settings(OPTIMA_QUEUES={"default": {}, "invoices": {}}):
        assert list(declarations.declared()) == ["content", "default", "invoices", "orders-sync", "repricer"]
        with override_settings(OPTIMA_QUEUE_DEFAULTS={"attempts": 9}):
            assert declarations.declared()["invoices"]["attempts"] == 9
        assert declarations.declared()["invoices"]["attempts"] == 5
    assert declarations.declared() == before


@override_settings(OPTIMA_QUEUES={"default": {}, "invoices": {"jitter": 2}})
def test_a_broken_declaration_is_refused_with_the_message_of_its_system_check():
    [error] = [e for e in run_checks() if e.id.startswith("queues.")]
    with pytest.raises(ImproperlyConfigured) as excinfo:
        declarations.declared()
    assert error.msg == "OPTIMA_QUEUES['invoices']['jitter'] must be a fraction between 0 and 1, got 2."
    assert str(excinfo.value) == f"{error.msg} {error.hint} (queues.E005; run manage.py check for all)"


def test_a_broken_app_declaration_is_refused_naming_the_app():
    with installed_with(BrokenConfig):
        with pytest.raises(ImproperlyConfigured) as excinfo:
            declarations.declared()
    assert str(excinfo.value).startswith(
        "broken.queues.QUEUES declares a queue named 'Invoices', which is not a valid queue name."
    )
    assert "(queues.E004; run manage.py check for all)" in str(excinfo.value)


@override_settings(OPTIMA_QUEUES=["default"])
def test_optima_queues_that_is_not_a_dict_is_refused_as_e008():
    with pytest.raises(ImproperlyConfigured) as excinfo:
        declarations.declared()
    assert str(excinfo.value).startswith("OPTIMA_QUEUES must be a dict of queue name -> options, got ['default'].")


@override_settings(OPTIMA_QUEUES={"default": {"attempts": 0}, "invoices": {}})
def test_queue_names_are_known_while_options_are_broken_so_schedule_checks_can_name_them():
    assert declarations.names() == {"default", "invoices", *FEATURE_QUEUES}


@pytest.mark.parametrize(
    "module, allowed",
    [
        ("queues/conf.py", set()),
        ("queues/catalog/queues.py", {"queues.conf", "queues.exceptions"}),
    ],
)
def test_conf_and_declarations_are_leaves_that_import_no_other_queues_module(module, allowed):
    tree = ast.parse((ROOT / module).read_text())
    imported = set()
    for node in ast.walk(tree):  # function-level imports count too
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names if alias.name.startswith("queues")}
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = "queues" + (f".{node.module}" if node.module else "")
            imported |= {base} if node.module else {f"queues.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "queues":
            imported |= {f"queues.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("queues"):
            imported.add(node.module)
    assert imported - allowed == set()


def test_job_modules_found_while_an_override_installed_an_app_end_with_the_override():
    """An app installed by ``override_settings`` (here one named ``tests.queues``, whose ``jobs`` package holds this
    suite's test modules) makes its ``jobs`` package a job module for the override only: a discovery made inside it
    used to outlive it, and every function decorated in those modules stayed a declared job for the rest of the
    process (tests/queues/jobs/test_gate.py's ``declared_outside_a_job_module``, in whichever process ran this
    first)."""
    from queues.catalog import jobs as catalog

    outside = "tests.queues.jobs.test_gate.declared_outside_a_job_module"
    assert "tests.queues.jobs" not in catalog.job_modules()
    with installed_with(InvoicingConfig):
        assert "tests.queues.jobs" in catalog.job_modules()  # discovered again with the app: its jobs package
        assert catalog.is_declared(outside)
    assert "tests.queues.jobs" not in catalog.job_modules()
    assert not catalog.is_declared(outside)
