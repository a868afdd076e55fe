"""No body makes a feature endpoint answer 500 (issue 11, item 3): every refusal is a 4xx in the
documented JSON shape (docs/api.md), and an oversized body is a 413 naming the limit."""

import json

import pytest
from django.test import override_settings

import queues
from features.content.models import ContentGeneration
from features.parsers import lone_surrogate_path
from features.redaction import shown

pytestmark = pytest.mark.django_db(transaction=True)

ENDPOINTS = ["/features/orders/sync/", "/features/repricer/", "/features/content/"]


@pytest.fixture
def client(api):
    return api.own(cabinets=[1], products=[1])


def send(client, path, raw, content_type="application/json"):
    return client.generic("POST", path, raw.encode("utf-8") if isinstance(raw, str) else raw, content_type=content_type)


def assert_body_error(response, *fragments):
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert sorted(body) == ["detail", "errors"]
    assert body["errors"][0]["field"] == "(body)"
    for fragment in fragments:
        assert fragment in body["detail"]
    return body


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_number_beyond_a_float_is_a_400_naming_it(client, path):
    response = send(client, path, '{"cabinet_id": 1e400, "product_id": 1e400}')
    assert_body_error(response, "the number 1e400 is out of range")


@pytest.mark.parametrize("raw", ['{"cabinet_id": NaN}', '{"cabinet_id": Infinity}', '{"cabinet_id": -Infinity}'])
def test_nan_and_infinity_are_not_json(client, raw):
    assert_body_error(send(client, "/features/orders/sync/", raw), "is not valid JSON")


@pytest.mark.parametrize(
    "raw, where",
    [
        ('{"product_id": 1, "prompt": "\\ud800"}', "prompt"),
        ('{"product_id": 1, "prompt": "ok", "\\udfff": 1}', "(body)"),
        ('{"product_id": 1, "prompt": ["a", {"b": "x\\udc00"}]}', "prompt[1].b"),
    ],
)
def test_a_lone_surrogate_anywhere_is_a_400_naming_where(client, raw, where):
    response = send(client, "/features/content/", raw)
    assert_body_error(response, f"a string at {where} holds a lone surrogate")
    assert ContentGeneration.objects.count() == 0


def test_a_surrogate_pair_is_ordinary_text(client):
    response = send(client, "/features/content/", '{"product_id": 1, "prompt": "socks \\ud83e\\udde6"}')
    assert response.status_code == 202
    assert ContentGeneration.objects.get().prompt == "socks \U0001f9e6"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_deep_nesting_is_a_400_not_a_recursion_error(client, path):
    assert_body_error(send(client, path, "[" * 200000), "nested too deeply")
    assert_body_error(send(client, path, '{"cabinet_id": ' + "[" * 100000 + "]" * 100000 + "}"), "nested too deeply")


def test_nesting_the_parser_accepts_is_echoed_shortened(client):
    response = send(client, "/features/orders/sync/", '{"cabinet_id": ' + "[" * 500 + "]" * 500 + "}")
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "cabinet_id"
    assert error["messages"] == ["Must be a JSON integer, got an array."]
    assert error["value"] == "[[[[...]]]]"


def test_a_huge_integer_is_refused_with_a_short_echo(client):
    response = send(client, "/features/orders/sync/", '{"cabinet_id": 1' + "0" * 400 + "}")
    assert response.status_code == 400
    assert response.json()["errors"][0]["value"] == "(an integer of 401 digits)"
    assert len(response.content) < 1000


def test_an_integer_past_pythons_digit_limit_is_a_parse_error(client):
    assert_body_error(send(client, "/features/orders/sync/", '{"cabinet_id": 1' + "0" * 5000 + "}"), "JSON parse error")


def test_a_long_string_value_is_echoed_shortened(client):
    response = send(
        client, "/features/repricer/", json.dumps({"product_id": 1, "price": "1.00", "idempotency_key": "x" * 100000})
    )
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["field"] == "idempotency_key"
    assert error["value"] == "x" * 200 + "..."


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (b'{"cabinet_id": 1, "x": "\xff"}', "not valid utf-8"),
        (b"", None),
    ],
)
def test_bytes_that_are_not_utf8_or_no_body_are_a_400(client, raw, fragment):
    response = send(client, "/features/orders/sync/", raw)
    assert response.status_code == 400
    if fragment:
        assert fragment in response.json()["detail"]


@pytest.mark.parametrize(
    "charset, fragment",
    [
        ("bz2_codec", 'Unsupported charset "bz2_codec"'),  # a decompressor, not a text encoding
        ("utf-16", "the body is not valid utf-16"),
    ],
)
def test_an_unusable_charset_is_a_400(client, charset, fragment):
    response = send(
        client, "/features/orders/sync/", '{"cabinet_id": 1}', content_type=f"application/json; charset={charset}"
    )
    assert_body_error(response, fragment)


def test_an_unknown_charset_is_ignored_as_django_does(client):
    response = send(
        client, "/features/orders/sync/", '{"cabinet_id": 1}', content_type="application/json; charset=no-such-charset"
    )
    assert response.status_code == 202


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
@pytest.mark.parametrize("path", ENDPOINTS)
def test_an_oversized_body_is_a_413_in_json_naming_the_limit(client, path):
    response = send(client, path, json.dumps({"cabinet_id": 1, "pad": "x" * 2000}))
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "The request body is larger than the limit of 1000 bytes.",
        "limit_bytes": 1000,
    }
    assert queues.get_queue("orders-sync").get_job_ids() == []


def test_a_10_mb_body_with_the_default_limit_is_a_413(client):
    response = send(client, "/features/orders/sync/", '{"cabinet_id": 1, "pad": "' + "x" * 10_000_000 + '"}')
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == 2621440


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000, DATA_UPLOAD_MAX_NUMBER_FIELDS=10)
def test_an_oversized_form_body_is_a_json_415(client):
    multipart = client.post("/features/orders/sync/", {"pad": "x" * 2000})
    fields = send(client, "/features/orders/sync/", "cabinet_id=1&" * 3000, "application/x-www-form-urlencoded")
    for response in (multipart, fields):
        assert response.status_code == 415
        assert response["Content-Type"] == "application/json"
        assert "Unsupported media type" in response.json()["detail"]


def test_the_status_of_a_very_long_or_odd_job_id_is_a_short_404(client):
    long_id = client.get("/jobs/" + "x" * 5000 + "/")
    odd = client.get("/jobs/%ED%A0%80/")
    assert long_id.status_code == odd.status_code == 404
    assert len(long_id.json()["detail"]) < 200
    assert "No job" in odd.json()["detail"]


def test_other_methods_answer_json_4xx(client):
    for response in (client.get("/features/orders/sync/"), client.put("/jobs/abc/", {}, format="json")):
        assert response.status_code == 405
        assert response["Content-Type"] == "application/json"
        assert "detail" in response.json()


def test_lone_surrogate_path_walks_without_recursion():
    deep = current = []
    for _ in range(10000):
        current.append([])
        current = current[0]
    current.append("\ud800")
    assert lone_surrogate_path(deep) == "[0]" * 10000 + "[0]"
    assert lone_surrogate_path({"a": ["b", {"c": "d"}]}) is None


@pytest.mark.parametrize(
    "value, expected",
    [
        ("\ud800x", "\\ud800x"),
        (float("inf"), "inf"),
        (float("nan"), "nan"),
        (True, True),
        (12, 12),
        (None, None),
        ({"a": "\udfff"}, "{'a': '\\udfff'}"),
    ],
)
def test_an_echoed_value_can_always_be_rendered_as_json(value, expected):
    assert shown(value) == expected
    json.dumps(shown(value), allow_nan=False, ensure_ascii=False).encode("utf-8")


def test_a_nul_character_is_refused_and_the_schema_says_so(client):
    response = send(client, "/features/content/", '{"product_id": 1, "prompt": "a\\u0000b"}')
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {"field": "prompt", "value": "a\x00b", "messages": ["Null characters are not allowed."]}
    ]
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    prompt = schema["components"]["schemas"]["ContentRequest"]["properties"]["prompt"]
    assert prompt["pattern"] == "^[^\\u0000]*$"


@pytest.mark.parametrize(
    "method, path, hint",
    [
        ("post", "/features/orders/sync", " Did you mean /features/orders/sync/ ?"),
        ("get", "/jobs/abc", " Did you mean /jobs/abc/ ?"),
        ("get", "/jobs/a/b/", ""),
        ("post", "/features/nope/", ""),
        ("get", "/features", ""),
    ],
)
def test_an_unknown_api_path_is_a_json_404(client, method, path, hint):
    response = getattr(client, method)(path, {"cabinet_id": 1}, format="json")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f"No endpoint {path!r}.{hint}"}


@override_settings(DEBUG=True)
def test_a_post_without_its_trailing_slash_is_not_a_500_in_debug(client):
    response = client.post("/features/orders/sync", {"cabinet_id": 1}, format="json")
    assert response.status_code == 404
