"""``{% job_hold job as hold %}``: where a job stands with its limit key (queues/producer/limits.py), for the
job page. One pipelined read; None for a job without a limit key or when Redis does not answer."""

import redis
from django import template

from queues.producer import limits

register = template.Library()


@register.simple_tag
def job_hold(job):
    try:
        return limits.hold_of(job)
    except (redis.RedisError, AttributeError, TypeError, ValueError):
        return None  # the page shows the rest of the job
