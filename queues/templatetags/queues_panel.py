"""Filters of the panel's templates that say what the API says.

- ``{{ job|panel_state }}``: the job's state in the API's words (``queues.jobs.state``): ``held`` for rq's
  ``rate_limited``, rq's status otherwise; ``unknown`` when rq cannot tell (as django-rq's ``job_status``).
- ``{{ status|api_state }}``: the same for rq's status as text.
- ``{{ value|pretty_json }}``: a job's ``meta`` (or any JSON value read from Redis) as indented JSON, the
  way the API returns it, instead of Python's ``repr``; a value JSON cannot hold falls back to ``str``.
"""

import json

from django import template
from rq.exceptions import InvalidJobOperation

register = template.Library()

# rq's status -> the API's state, where they differ (queues/jobs/state.py).
API_STATE = {"rate_limited": "held"}


@register.filter
def panel_state(job):
    try:
        status = job.get_status()
    except InvalidJobOperation:
        return "unknown"
    return api_state(getattr(status, "value", status))


@register.filter
def api_state(status):
    """rq's status as text (a find result's) in the API's words."""
    return API_STATE.get(status, status)


@register.filter
def pretty_json(value):
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
