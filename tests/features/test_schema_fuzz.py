"""Schemathesis against the feature API's own OpenAPI schema (/api/schema/): generated valid and
invalid requests to every operation; none may make a view answer 500, and every answer must match
the schema (status codes, content types, bodies).

The schema is loaded from the WSGI application at collection (schemathesis' ``from_fixture``
does not work with pytest 9: it reads ``request.node._nodeid``)."""
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from optima_site.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

pytestmark = pytest.mark.slow


@schema.parametrize()
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much])
@pytest.mark.django_db(transaction=True)
def test_no_generated_request_makes_a_feature_endpoint_fail(case, api):
    case.call_and_validate(headers={"Authorization": f"Token {api.token}"})
