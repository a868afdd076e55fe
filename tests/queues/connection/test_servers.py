"""Several Redis servers (queues/connection/servers.py): QUEUES_REDIS_SERVERS, a queue's "redis" option, their
checks (queues.E130-E133) and where each queue's clients, django-rq's included, connect."""

import pytest
from django.conf import settings as django_settings
from django.core.checks import Error, run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from queues.catalog.lookup import get_queue
from queues.catalog.queues import get_config, on_server
from queues.connection import clients, servers
from queues.connection.djangorq import django_rq_config

ORDERS = "redis://10.0.0.7:6390/3"


def server_errors():
    return [e for e in run_checks() if e.id in ("queues.E130", "queues.E131", "queues.E132", "queues.E133")]


def test_without_the_setting_there_is_one_server_the_default():
    assert servers.names() == ["default"]
    assert servers.get().url == django_settings.QUEUES_REDIS_URL
    assert server_errors() == []


@override_settings(QUEUES_REDIS_SERVERS={"orders": ORDERS}, OPTIMA_QUEUES={"default": {}, "o": {"redis": "orders"}})
def test_a_queue_naming_a_server_lives_there_and_the_others_on_the_default():
    assert server_errors() == []
    assert servers.names() == ["default", "orders"]
    assert servers.of_queue("o") == "orders"
    assert servers.of_queue("default") == "default"
    assert on_server("orders") == ["o"]
    assert "o" not in on_server("default")
    kwargs = get_queue("o").connection.connection_pool.connection_kwargs
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("10.0.0.7", 6390, 3)
    assert get_queue("default").connection is clients.get_connection()
    assert get_queue("o").connection is clients.get_connection("orders")
    assert "redis" not in get_config("o").options  # a server is no job option: an enqueue cannot override it


@override_settings(QUEUES_REDIS_SERVERS='{"orders": "redis://10.0.0.7:6390/3"}')
def test_the_setting_may_be_the_environments_json_object():
    assert servers.get("orders").url == ORDERS
    assert server_errors() == []


@override_settings(
    QUEUES_REDIS_SERVERS={"orders": "rediss://app:s3cr3t@redis-orders:6380/2?ssl_ca_certs=/etc/ca.pem"},
    OPTIMA_QUEUES={"default": {}, "o": {"redis": "orders"}},
)
def test_django_rq_reaches_each_queue_on_its_server_with_its_user_password_and_tls():
    entry = django_settings.RQ_QUEUES["o"]
    assert (entry["HOST"], entry["PORT"], entry["DB"]) == ("redis-orders", 6380, 2)
    assert (entry["USERNAME"], entry["PASSWORD"], entry["SSL"]) == ("app", "s3cr3t", True)
    assert entry["REDIS_CLIENT_KWARGS"]["ssl_ca_certs"] == "/etc/ca.pem"
    default, base = django_settings.RQ_QUEUES["default"], django_rq_config()
    assert (default["HOST"], default["PORT"], default["SSL"]) == (base["HOST"], base["PORT"], False)
    assert "s3cr3t" not in repr(servers.validate()) and "s3cr3t" not in clients.describe(server="orders")


@override_settings(
    QUEUES_REDIS_SERVERS={
        "orders": {
            "URL": "redis://app:pw@ignored:1/4",
            "SENTINELS": "10.0.0.1:26379,10.0.0.2:26379",
            "SENTINEL_MASTER": "o",
        }
    },
    OPTIMA_QUEUES={"default": {}, "o": {"redis": "orders"}},
)
def test_a_server_found_through_sentinel():
    assert server_errors() == []
    found = servers.get("orders")
    assert (found.sentinel.sentinels, found.sentinel.master) == ((("10.0.0.1", 26379), ("10.0.0.2", 26379)), "o")
    entry = django_settings.RQ_QUEUES["o"]
    assert (entry["SENTINELS"], entry["MASTER_NAME"], entry["DB"]) == (
        [["10.0.0.1", 26379], ["10.0.0.2", 26379]],
        "o",
        4,
    )
    assert "Sentinel master 'o'" in clients.describe(server="orders")


@override_settings(QUEUES_REDIS_SERVERS={"orders": ORDERS}, OPTIMA_QUEUES={"default": {}, "o": {"redis": "ordres"}})
def test_a_queue_naming_an_unknown_server_is_e130_with_did_you_mean():
    assert server_errors() == [
        Error(
            "OPTIMA_QUEUES['o']['redis'] names the Redis server 'ordres', which QUEUES_REDIS_SERVERS does not declare.",
            hint="Did you mean 'orders'? The servers: 'default', 'orders'. Add 'ordres' to QUEUES_REDIS_SERVERS or fix "
            "the name (docs/settings.md#several-redis-servers).",
            id="queues.E130",
        )
    ]
    with pytest.raises(ImproperlyConfigured, match=r"names the Redis server 'ordres'.*\(queues.E130"):
        get_queue("o")


@pytest.mark.parametrize(
    "value, says",
    [
        ("http://10.0.0.7/", "not a Redis URL: the scheme must be redis:// or rediss://"),
        ("redis://:pw@host:notaport/0", "not a Redis URL"),
        (6379, "must be a Redis URL, got int 6379"),
        ({"URL": ORDERS, "SENTINEL": "x"}, "has unknown keys 'SENTINEL'"),
        ({"URL": ORDERS, "SENTINELS": "10.0.0.1"}, "expected host:port"),
        ({"URL": ORDERS, "SENTINELS": "10.0.0.1:26379"}, "Sentinel needs both"),
    ],
)
def test_a_bad_server_is_e131_naming_it_and_the_value(value, says):
    with override_settings(QUEUES_REDIS_SERVERS={"orders": value}):
        errors = server_errors()
        assert [e.id for e in errors] == ["queues.E131"]
        assert "QUEUES_REDIS_SERVERS['orders']" in errors[0].msg and says in errors[0].msg
        with pytest.raises(ImproperlyConfigured, match="queues.E131"):
            clients.get_connection("orders")


def test_a_bad_url_is_shown_without_its_password():
    with override_settings(QUEUES_REDIS_SERVERS={"orders": "redis://u:s3cr3t@host:notaport/0"}):
        (error,) = server_errors()
        assert "s3cr3t" not in error.msg and "u:***@host" in error.msg


@pytest.mark.parametrize("value", ["[1, 2]", ["orders"], "not json"])
def test_a_setting_that_is_no_dict_is_e131(value):
    with override_settings(QUEUES_REDIS_SERVERS=value):
        errors = server_errors()
        assert [e.id for e in errors] == ["queues.E131"]
        assert errors[0].msg.startswith("QUEUES_REDIS_SERVERS must be a dict of server name -> Redis URL, got ")


def test_a_bad_server_name_is_e131():
    with override_settings(QUEUES_REDIS_SERVERS={"Orders!": ORDERS}):
        assert [(e.id, e.msg) for e in server_errors()] == [
            ("queues.E131", "QUEUES_REDIS_SERVERS names a server 'Orders!', which is not a valid server name.")
        ]


def test_a_server_named_as_the_default_is_e132():
    with override_settings(QUEUES_REDIS_SERVERS={"default": ORDERS}):
        errors = server_errors()
        assert [e.id for e in errors] == ["queues.E132"]
        assert "that name is the default server's, QUEUES_REDIS_URL (REDIS_URL)" in errors[0].msg


@pytest.mark.parametrize("value", [3, "Orders", ""])
def test_a_redis_option_that_is_no_server_name_is_e133(value):
    with override_settings(OPTIMA_QUEUES={"default": {}, "o": {"redis": value}}):
        assert [(e.id, e.msg) for e in server_errors()] == [
            ("queues.E133", f"OPTIMA_QUEUES['o']['redis'] must be the name of a Redis server, got {value!r}.")
        ]


def test_the_redis_option_is_a_queues_not_a_default_of_every_queue():
    with override_settings(OPTIMA_QUEUE_DEFAULTS={"redis": "orders"}):
        assert [e.id for e in run_checks() if e.id.startswith("queues.E00")] == ["queues.E002"]


def test_the_default_server_may_be_named_explicitly():
    with override_settings(OPTIMA_QUEUES={"default": {}, "o": {"redis": "default"}}):
        assert server_errors() == []
        assert servers.of_queue("o") == "default"
        assert get_queue("o").connection is clients.get_connection()


def test_an_unknown_server_name_is_refused_naming_the_servers():
    with override_settings(QUEUES_REDIS_SERVERS={"orders": ORDERS}):
        with pytest.raises(ValueError, match=r"No Redis server 'billing': the servers are 'default', 'orders'"):
            clients.get_connection("billing")
