"""Feature settings: settings, then environment, then defaults; dev-only schedules."""

import pytest
from django.test import override_settings

from features import conf


def test_a_setting_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("MARKETPLACE_READ_TIMEOUT", "3")
    assert conf.get("MARKETPLACE_READ_TIMEOUT") == 3.0
    with override_settings(MARKETPLACE_READ_TIMEOUT=7.5):
        assert conf.get("MARKETPLACE_READ_TIMEOUT") == 7.5


def test_an_unset_value_falls_back_to_the_default(monkeypatch):
    monkeypatch.delenv("MARKETPLACE_PAGE_SIZE", raising=False)
    assert conf.get("MARKETPLACE_PAGE_SIZE") == 100


def test_a_non_numeric_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("CONTENT_TIMEOUT", "soon")
    with pytest.raises(ValueError) as caught:
        conf.get("CONTENT_TIMEOUT")
    assert str(caught.value) == "CONTENT_TIMEOUT must be a number, got 'soon'."


def test_periodic_syncs_run_for_four_demo_cabinets_in_dev_only(monkeypatch):
    monkeypatch.delenv("ORDERS_SYNC_CABINETS", raising=False)
    monkeypatch.delenv("ORDERS_SYNC_INTERVAL", raising=False)
    with override_settings(OPTIMA_ENV="dev"):
        assert (conf.sync_cabinets(), conf.sync_interval()) == ([1, 2, 3, 4], 60)
    with override_settings(OPTIMA_ENV="prod"):
        assert (conf.sync_cabinets(), conf.sync_interval()) == ([], 300)
    monkeypatch.setenv("ORDERS_SYNC_CABINETS", "7, 9")
    with override_settings(OPTIMA_ENV="prod"):
        assert conf.sync_cabinets() == [7, 9]


def test_test_runs_declare_no_periodic_sync():
    from features.orders.queues import SCHEDULES

    assert SCHEDULES == []  # OPTIMA_ENV=test: no sync hits a marketplace that is not there
