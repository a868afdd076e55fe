"""A job whose parameters are named like enqueue options: declared enqueue_call_only
(queues/catalog/jobs.py), so only ``queues.enqueue_call`` enqueues it."""

import queues


@queues.job(enqueue_call_only=True)
def echo_options(value, timeout=None, at=None):
    return {"value": value, "timeout": timeout, "at": at}
