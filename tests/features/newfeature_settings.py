"""The project's settings plus one installed feature app, as docs/adding-a-feature.md does it."""

from optima_site.settings import *  # noqa: F401,F403
from optima_site.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.features.newfeature"]
