"""Reading /metrics in a test: one scrape, its samples by name and labels."""

from prometheus_client.parser import text_string_to_metric_families

PLAIN = "text/plain; version=0.0.4; charset=utf-8"


def scrape(client, **headers):
    response = client.get("/metrics", **headers)
    assert response.status_code == 200
    return response


def samples(response):
    """{(sample name, frozenset(labels)): value} of a 0.0.4 text response."""
    assert response["Content-Type"] == PLAIN
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            found[(s.name, frozenset(s.labels.items()))] = s.value
    return found
