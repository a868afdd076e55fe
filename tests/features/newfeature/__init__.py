"""A feature app exactly as docs/adding-a-feature.md writes it: a queue, a job, nothing else.

Installed only by ``tests/features/newfeature_settings.py`` (the one line a real feature adds to
INSTALLED_APPS), to prove the queue then shows up in the panel and /metrics with no other change.
"""
