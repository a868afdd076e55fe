"""Fixtures of the panel's tests: ``client`` (an anonymous client of the open panel, OPTIMA_ENV=dev) and
``round_trips`` (tests/support/roundtrips.py: a page's Redis round trips)."""

import pytest
from django.test import Client

from tests.support.roundtrips import round_trips_fixture  # noqa: F401 (the fixture "round_trips")


@pytest.fixture
def client(settings):
    settings.OPTIMA_ENV = "dev"
    return Client()
