"""The site's settings without LOGGING, as a fresh project has none: what a worker prints then
(tests/queues/logs/test_console.py)."""

from optima_site.settings import *  # noqa: F401,F403

LOGGING = {}  # Django configures only its own loggers; the root logger has no handler
