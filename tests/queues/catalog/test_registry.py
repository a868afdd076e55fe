"""Declaring queues: settings and feature apps, one declaration is enough everywhere."""

import signal

from django.conf import settings
from django.test import override_settings

from queues.catalog.lookup import declared, get_config, queue_names
from tests.support import wait_for


def test_queues_from_settings_and_feature_apps_are_all_declared():
    assert queue_names() == ["content", "default", "orders-sync", "repricer"]
    assert get_config("orders-sync").source == "orders"
    assert get_config("default").source == "settings"


def test_queue_options_resolve_global_then_queue():
    assert get_config("repricer")["attempts"] == 1
    assert get_config("default")["attempts"] == 5
    with override_settings(OPTIMA_QUEUE_DEFAULTS={"attempts": 3}):
        assert get_config("default")["attempts"] == 3
        assert get_config("repricer")["attempts"] == 1


def test_settings_override_a_feature_apps_declaration_key_by_key():
    with override_settings(OPTIMA_QUEUES={"default": {}, "content": {"attempts": 2}}):
        assert get_config("content")["attempts"] == 2
        assert get_config("content")["timeout"] == 600


def test_django_rq_sees_every_declared_queue_with_json_and_timeouts():
    assert sorted(settings.RQ_QUEUES) == sorted(declared())
    cfg = settings.RQ_QUEUES["orders-sync"]
    assert cfg["SERIALIZER"] == "rq.serializers.JSONSerializer"
    assert cfg["REDIS_CLIENT_KWARGS"]["socket_timeout"] == 2.0
    assert settings.RQ["WORKER_CLASS"] == "queues.worker.OptimaWorker"


def test_django_rq_sees_a_queue_declared_under_override_settings_and_not_after():
    with override_settings(OPTIMA_QUEUES={"default": {}, "invoices": {"timeout": 30}}):
        assert sorted(settings.RQ_QUEUES) == ["content", "default", "invoices", "orders-sync", "repricer"]
        assert settings.RQ_QUEUES["invoices"]["DEFAULT_TIMEOUT"] == 30
        assert settings.RQ_QUEUES["invoices"]["QUEUE_CLASS"] == "queues.registry.OptimaQueue"
    assert "invoices" not in settings.RQ_QUEUES


def test_rqworker_without_names_serves_every_declared_queue(start_worker, queue_redis):
    worker = start_worker()

    def registered_queues():
        from rq import Worker

        workers = Worker.all(connection=queue_redis)
        return workers and sorted(workers[0].queue_names())

    assert wait_for(registered_queues, timeout=60, message="the worker to register") == [
        "content",
        "default",
        "orders-sync",
        "repricer",
    ]
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
